"""The papers' studies on the lab (README.md): `python -m bench.repro.reproduce STUDY`;
`reprokit` runs them, keeps their evidence and evaluates the findings."""
