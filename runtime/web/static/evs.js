// Live updates of an open session: rows rendered by the server arrive over server-sent events.
(function () {
  "use strict";
  function start() {
    var list = document.getElementById("timeline");
    if (!list || list.dataset.live !== "1" || !window.EventSource) { return; }
    var url = "/live/" + list.dataset.session + "?after=" + encodeURIComponent(list.dataset.after) +
      (list.dataset.address ? "&" + list.dataset.address : "");
    var source = new EventSource(url);
    source.addEventListener("row", function (message) {
      var holder = document.createElement("ol");
      holder.innerHTML = message.data; // HTML the server rendered and escaped
      var row = holder.firstElementChild;
      if (!row || document.getElementById(row.id)) { return; }
      var empty = list.querySelector(".empty");
      if (empty) { empty.remove(); }
      list.appendChild(row);
      list.dataset.after = row.dataset.seq;
    });
    var status = document.getElementById("live-status");
    source.onopen = function () { if (status) { status.textContent = "live: connected"; } };
    source.onerror = function () { if (status) { status.textContent = "live: reconnecting…"; } };
  }
  document.addEventListener("DOMContentLoaded", start);
}());
