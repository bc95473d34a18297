"""The course's maintainer tools; run one from the repository's root as ``python -m tools.NAME`` (list: ``python -m tools``)."""

# Where tools/run.py's CourseClient takes its kernel-start lock (default: the temp folder). It lives here so that
# conftest.py can point every test process at one folder without importing nbclient (1.2 s in xdist's controller).
KERNEL_LOCK_DIR_ENV = "BAI14_KERNEL_LOCK_DIR"
EXECUTED_DIR_ENV = "BAI14_EXECUTED_DIR"  # where tools/run.py caches executed notebooks (default: build/executed)
