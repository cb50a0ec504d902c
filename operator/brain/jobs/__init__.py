"""The learning loops that run as jobs: `python -m brain.jobs.ingest|distill|digest`.

Each job records a `job_runs` row and prints, as the last line of stdout, a JSON summary (the
operator copies an ingest's counts into `MemorySource.status`). Progress goes to stderr, and only
when a person is watching (a TTY, or BRAIN_PROGRESS=1).
"""
