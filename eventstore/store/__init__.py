"""The store façade: ``EventStore`` (``facade``) and its mixins for mapping reads
(``reads``), artifacts (``artifacts``) and forks (``fork``). It checks arguments,
encodes events for the backend and knows no SQL. Public through ``eventstore``.
"""
