"""The formats chatledger reads and writes outside its stores: LangChain4j's message JSON
(:mod:`eventlog.formats.lc4j_json`) and the JSON Lines export (:mod:`eventlog.formats.jsonl`)."""
