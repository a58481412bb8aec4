import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import os  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _children_find_their_libpython(monkeypatch):
    """Tests that embed R (rpy2) leave R's library paths in LD_LIBRARY_PATH, which can hold the system's libpython;
    a Python child process started by a later test would load it and fail (``_ssl``: undefined symbol). Every test
    starts with this interpreter's library folder first there (gcnmops.pipeline.batch.python_process_env)."""
    if os.environ.get("LD_LIBRARY_PATH"):
        from gcnmops.pipeline.batch import python_process_env

        monkeypatch.setenv("LD_LIBRARY_PATH", python_process_env()["LD_LIBRARY_PATH"])


@pytest.fixture(scope="session")
def results():
    """(raw, integer) results of a small simulated cohort on two chromosomes (losses CN0/CN1, gains CN3), for the
    writer and call-file tests."""
    import gcnmops
    from gcnmops.example import example_cohort

    data, _ = example_cohort(n_regions=1200, n_samples=12, n_cnvs=6, seed=5)
    raw = gcnmops.cn_mops(data, backend="cpu")
    assert len(raw.cnvs) > 0
    return raw, gcnmops.calc_integer_copy_numbers(raw)


# ------------------------------------------------------------------------------------------ background jobs
_JOBS = pytest.StashKey()


def pytest_collection_finish(session):
    """Start the background jobs (background.py) of the selected tests once they are collected."""
    import background

    if not session.config.option.collectonly:
        session.config.stash[_JOBS] = background.start_for(session.items)


def pytest_sessionfinish(session):
    for job in session.config.stash.get(_JOBS, {}).values():
        job.stop()


@pytest.fixture(scope="session")
def background_jobs(request) -> dict:
    """The session's started background jobs: the name of the fixture that asked for each -> the job."""
    return request.config.stash.get(_JOBS, {})


@pytest.fixture(scope="session")
def cuda_simulator(background_jobs):
    """The session's CUDA-simulator child (cudasim.Simulator): ``cuda_simulator.wait(__name__)`` is the folder
    where the calling test module's scenario wrote its results."""
    simulator = background_jobs.get("cuda_simulator")
    assert simulator is not None, "the CUDA-simulator child was not started (is the scenario registered?)"
    return simulator


@pytest.fixture
def left_by_a_killed_run():
    """``make(*targets)``: the temporaries (``gcnmops.files.temp_file``) of each target path, made by a process
    that has ended since, as a run killed outright leaves them."""
    import subprocess

    code = ("import sys; from pathlib import Path; from gcnmops.files import temp_file; "
            "print('\\n'.join(str(temp_file(Path(t))) for t in sys.argv[1:]))")

    def make(*targets) -> list[Path]:
        done = subprocess.run([sys.executable, "-c", code, *map(str, targets)], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).resolve().parents[1])
        return [Path(line) for line in done.stdout.splitlines()]

    return make
