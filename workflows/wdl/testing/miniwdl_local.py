"""A miniwdl container backend that runs task commands on the host, without a container: for testing the WDL
workflows where no container runtime is installed (the task's ``docker`` image is ignored; the host's programs,
``gcnmops`` among them, run the command). Not for production: nothing isolates the task.

A container backend plugin (miniwdl's group ``miniwdl.plugin.container_backend``, name ``local``), built on
``WDL.runtime.backend.cli_subprocess.SubprocessBase``: its "container" directory is the task's run directory
itself, so the paths the command sees are host paths; each input is linked where miniwdl would mount it
(``work/_miniwdl_inputs/...``). A retry moves the failed attempt's ``work``, ``stdout.txt`` and ``stderr.txt``
aside (``*.failed<n>``) and runs again in a fresh ``work``.

Register it with an entry point, e.g. a folder on PYTHONPATH holding ``miniwdl_local-0.dist-info/`` with a
``METADATA`` file and an ``entry_points.txt`` of::

    [miniwdl.plugin.container_backend]
    local = miniwdl_local:LocalContainer

this folder on PYTHONPATH too, and select it with ``MINIWDL__SCHEDULER__CONTAINER_BACKEND=local`` (or
``[scheduler] container_backend = local`` in a miniwdl config file).
"""
from __future__ import annotations

import logging
import os
from contextlib import ExitStack

from WDL.runtime import config
from WDL.runtime.backend.cli_subprocess import SubprocessBase


class LocalContainer(SubprocessBase):
    """miniwdl TaskContainer running the command in ``<run dir>/work`` on the host."""

    def __init__(self, cfg: config.Loader, run_id: str, host_dir: str) -> None:
        super().__init__(cfg, run_id, host_dir)
        self.container_dir = host_dir

    @classmethod
    def global_init(cls, cfg: config.Loader, logger: logging.Logger) -> None:
        logger.notice("local (no container) task backend: for tests only")  # type: ignore[attr-defined]

    @property
    def cli_name(self) -> str:
        return "local"

    def host_work_dir(self) -> str:
        return os.path.join(self.host_dir, "work")

    def host_stdout_txt(self) -> str:
        return os.path.join(self.host_dir, "stdout.txt")

    def host_stderr_txt(self) -> str:
        return os.path.join(self.host_dir, "stderr.txt")

    def host_cli_log_txt(self, cli_name: str) -> str:
        return os.path.join(self.host_dir, f"{cli_name}.log.txt")

    def reset(self, logger: logging.Logger) -> None:
        """A retry: the failed attempt's files moved aside, a fresh work directory."""
        failed = f"failed{self.try_counter}"
        for name in ("work", "stdout.txt", "stderr.txt"):
            path = os.path.join(self.host_dir, name)
            if os.path.lexists(path):
                stem, dot, ext = name.partition(".")
                os.rename(path, os.path.join(self.host_dir, f"{stem}.{failed}{dot}{ext}"))
        super().reset(logger)

    def _pull_invocation(self, logger: logging.Logger, cleanup: ExitStack) -> tuple[str, list[str]]:
        return self.runtime_values.get("docker", ""), []  # no image: nothing to pull

    def _run_invocation(self, logger: logging.Logger, cleanup: ExitStack, image: str) -> list[str]:
        """Each input linked at its mount point (the other mounts are the host paths themselves); the command
        started in the work directory."""
        for container_path, host_path, _writable in self.prepare_mounts():
            if os.path.abspath(container_path) == os.path.abspath(host_path):
                continue
            if os.path.lexists(container_path):
                if os.path.isdir(container_path) and not os.path.islink(container_path):
                    os.rmdir(container_path)  # an empty mount point made by touch_mount_point
                else:
                    os.unlink(container_path)
            os.makedirs(os.path.dirname(container_path), exist_ok=True)
            os.symlink(host_path, container_path)
        return ["/bin/sh", "-c", 'cd "$0" && exec "$@"', os.path.join(self.container_dir, "work")]
