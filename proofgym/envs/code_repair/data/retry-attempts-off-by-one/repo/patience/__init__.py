"""patience: retries with exponential backoff."""

from patience.backoff import Backoff
from patience.retry import RetryError, retry, retrying

__all__ = ["Backoff", "RetryError", "retry", "retrying"]
