"""Plans: YAML text -> a validated, frozen `Plan` (parse), its structure (schema), how it runs
(course), the files it names (manifest), its sweep and stop conditions, its steps, its thresholds,
its journeys (journeys: checks, extractions, cookies; templates: the `${...}` grammar;
journeycheck: what validate refuses in them; patterns: the regexes the engine can run), and its
credentials kept out of run directories (redact).

Imports only `model`.
"""
