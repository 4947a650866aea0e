"""One run of a plan: its steps in order (run), the pipeline of its stream's consumers, its
journal, the recovery of runs a dead controller left and their takeover, what a run says
about itself (announcements), and what StartRun checks beyond the plan (admission).
"""
