"""The errors the course raises on purpose, each saying what happened and what to do."""

from __future__ import annotations


class CourseError(RuntimeError):
    """Base of every error course_utils raises deliberately."""


class Stopped(KeyboardInterrupt):
    """An interrupt (the Stop button) that the course has handled: every process it had
    started is gone, and the message says so. It is still a KeyboardInterrupt, so whatever
    stops on one stops on it; but Jupyter shows only its message (IPython renders an
    exception through `_render_traceback_` when it has one): the launcher's frames above
    it would bury the one line the learner needs under twenty they cannot act on."""

    def _render_traceback_(self) -> list[str]:
        return [f"Stopped: {self}"]


class BackendError(CourseError):
    """The requested backend cannot run here (e.g. NCCL without a GPU per rank)."""


class LaunchError(CourseError):
    """A rank of a launch failed; carries which rank, how, and that rank's own traceback.

    `rank` is the rank that failed first in time (a peer's secondary "connection closed"
    is never reported in its place); `remote_traceback` is the text of its traceback;
    `original` is its exception when it could be sent back, else None.
    """

    def __init__(
        self,
        message: str,
        *,
        rank: int | None = None,
        world_size: int | None = None,
        exc_type: str | None = None,
        remote_traceback: str | None = None,
        original: BaseException | None = None,
    ):
        super().__init__(message)
        self.rank = rank
        self.world_size = world_size
        self.exc_type = exc_type
        self.remote_traceback = remote_traceback
        self.original = original


class LaunchTimeout(LaunchError):
    """A launch did not finish within its timeout: some rank hung, or ranks deadlocked."""


class ChildError(CourseError):
    """A call `ranks.launch.run_in_child` made raised, died or overran its timeout;
    `outcome` says which."""

    def __init__(self, message: str, outcome):
        super().__init__(message)
        self.outcome = outcome


class ProfileError(CourseError, ValueError):
    """An unknown profile name."""


class DataError(CourseError):
    """A dataset is missing or corrupt, with the way to get it."""
