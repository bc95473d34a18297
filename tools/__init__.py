"""The course's maintainer tools; run one from the repository's root as ``python -m tools.NAME`` (list: ``python -m tools``)."""
