"""The project's exceptions. The CLI turns any :class:`TunerError` into a one-line message."""


class TunerError(Exception):
    """Base class: an expected failure with a message meant for the user."""


class StorageError(TunerError):
    """The tuning database cannot be opened, read or written."""


class SchemaError(StorageError):
    """The database's schema revision does not match this tuner."""


class WorkloadError(TunerError):
    """The model, its inputs or the requested device are not usable."""
