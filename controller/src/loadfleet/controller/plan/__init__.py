"""Plans: YAML text -> a validated, frozen `Plan` (parse), its structure (schema), how it runs
(course), the files it names (manifest), its sweep and stop conditions, its steps, and its
credentials kept out of run directories (redact).

Imports only `model`.
"""
