"""The release, in one place: pyproject.toml reads it (dynamic version), reports print it."""
__version__ = '0.1.0'
