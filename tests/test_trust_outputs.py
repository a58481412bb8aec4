"""What gcnmops runs, removes and replaces on disk: kernel caches only in private folders (a damaged one is
compiled again), old files removed only inside the output folder and only after a run succeeded, ``convert`` and
``reference build`` replacing only what gcnmops made, stale temporaries of killed runs removed, one run at a time
in an output folder, no Dask work store left behind, outputs readable as the umask says, archives whose sizes are
checked before anything is allocated, damaged stores refused, and standard output closed, full or ASCII-only."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gcnmops import files, jitcache
from gcnmops.cli import main
from gcnmops.errors import InputError
from gcnmops.io import npz, read_counts
from gcnmops.outputs import writers
from gcnmops.io.store import save_count_data

REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _table(path: Path, m: int = 300, n: int = 4, seed: int = 1) -> Path:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.poisson(80, size=(m, n)), columns=[f"S{k + 1}" for k in range(n)])
    frame.insert(0, "end", np.arange(1, m + 1) * 1000)
    frame.insert(0, "start", np.arange(m) * 1000 + 1)
    frame.insert(0, "seqnames", ["chr1"] * (m // 2) + ["chr2"] * (m - m // 2))
    frame.to_csv(path, sep="\t", index=False)
    return path


def _user_folder(path: Path, **contents: str) -> dict:
    path.mkdir()
    for name, text in contents.items():
        (path / name).write_text(text)
    return {name: (path / name).read_text() for name in contents}


# ------------------------------------------------------------------------------------------ kernel caches
@pytest.mark.skipif(not hasattr(os, "chown") or os.geteuid() != 0, reason="needs root to give a folder away")
def test_a_cache_folder_of_another_user_is_never_used(monkeypatch, tmp_path):
    planted = tmp_path / "xdg" / "gcnmops"
    planted.mkdir(parents=True, mode=0o700)
    os.chown(planted, NOBODY, NOBODY)  # another user's folder, where ours would be
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    chosen = jitcache.cache_folder()
    assert chosen is not None and chosen != planted and not jitcache.private_folder(planted)
    st = chosen.stat()
    assert chosen.name.startswith("gcnmops-kernels.") and st.st_uid == os.geteuid()
    assert stat.S_IMODE(st.st_mode) == 0o700


def test_a_cache_folder_others_can_write_is_never_used(monkeypatch, tmp_path):
    """Our own folder, but group- or world-writable (another user could plant kernels there): not used, also
    when NUMBA_CACHE_DIR names it; a private replacement is chosen."""
    import numba.core.config as config

    shared = tmp_path / "xdg" / "gcnmops"
    shared.mkdir(parents=True)
    for mode in (0o770, 0o777):
        shared.chmod(mode)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        chosen = jitcache.cache_folder()
        assert chosen != shared and stat.S_IMODE(chosen.stat().st_mode) == 0o700
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(shared))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "mine"))
    monkeypatch.setattr(config, "CACHE_DIR", str(shared))
    assert jitcache.configure() == str(tmp_path / "mine" / "gcnmops")
    assert os.environ["NUMBA_CACHE_DIR"] == config.CACHE_DIR == str(tmp_path / "mine" / "gcnmops")
    assert stat.S_IMODE((tmp_path / "mine" / "gcnmops").stat().st_mode) == 0o700


def test_a_damaged_kernel_cache_means_compiling_again(tmp_path):
    """Cut data files, garbage data files, a truncated index, then folders where its files go: the kernel is
    compiled again (and used uncached) and gives its answer."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    (tmp_path / "kmod.py").write_text("from numba import njit\n\n@njit(cache=True)\ndef twice(x):\n    return 2 * x\n")
    script = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import gcnmops, kmod; print(kmod.twice(21))"

    def run() -> str:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                              env=_env(NUMBA_CACHE_DIR=str(cache)))
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
        return done.stdout.strip()

    assert run() == "42"
    data, index = sorted(cache.rglob("*.nbc")), sorted(cache.rglob("*.nbi"))
    assert data and index
    for f in data:
        f.write_bytes(f.read_bytes()[:len(f.read_bytes()) // 2])
    assert run() == "42"
    for f in data:
        f.write_bytes(b"\x80\x04garbage, not a pickle")
    assert run() == "42"
    for f in cache.rglob("*.nbi"):
        f.write_bytes(f.read_bytes()[:len(f.read_bytes()) // 2])
    assert run() == "42"
    for f in data + index:
        f.unlink()
        f.mkdir()
    assert run() == "42" and not [f for f in cache.rglob("*") if ".tmp" in f.name]


# ------------------------------------------------------------------------------------------ old files of -o
def test_old_files_are_removed_only_inside_the_output_folder(results, tmp_path):
    """The list of an earlier run's files names files behind a linked subfolder and outside: they survive; a
    listed file that is really inside goes."""
    out, other = tmp_path / "out", tmp_path / "other"
    out.mkdir()
    other.mkdir()
    (other / "v3.txt").write_text("another folder's file")
    (out / "plots").symlink_to(other, target_is_directory=True)
    (out / "v4.txt").write_text("written by the earlier run")
    (out / "link.txt").symlink_to(other / "v3.txt")
    (out / writers.MANIFEST).write_text("plots/v3.txt\nv4.txt\nlink.txt\n../other/v3.txt\n" + f"{other}/v3.txt\n")
    writers.write_result(results[1], out, formats=["bed"])
    assert (other / "v3.txt").read_text() == "another folder's file"
    assert (out / "link.txt").is_symlink() and not (out / "v4.txt").exists()


def test_a_linked_plots_folder_is_refused_before_any_work(tmp_path):
    out, other = tmp_path / "out", tmp_path / "other"
    out.mkdir()
    other.mkdir()
    (other / "overview.png").write_text("the user's picture")
    (out / "plots").symlink_to(other, target_is_directory=True)
    (out / writers.MANIFEST).write_text("plots/overview.png\n")
    assert main(["run", "--example", "-o", str(out), "--plots", "--backend", "cpu", "--quiet"]) == 2
    assert sorted(p.name for p in other.iterdir()) == ["overview.png"]
    assert (other / "overview.png").read_text() == "the user's picture"


def test_a_run_that_fails_deletes_nothing(results, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.tsv").write_text("the earlier run's file")
    (out / writers.MANIFEST).write_text("old.tsv\n")

    def failing(sizes):
        raise InputError("the plots could not be made")

    with pytest.raises(InputError, match="plots could not"):
        writers.write_result(results[1], out, formats=["bed"], extra=failing)
    assert sorted(p.name for p in out.iterdir()) == [writers.MANIFEST, "old.tsv"]


# ------------------------------------------------------------------------------------------ convert / reference
def test_convert_refuses_what_it_did_not_make(tmp_path, capsys):
    table = _table(tmp_path / "c.tsv")
    user = tmp_path / "mine.zarr"
    kept = _user_folder(user, **{"notes.txt": "the user's notes", ".zattrs": '{"sample_names": ["x"]}'})
    afile = tmp_path / "file.zarr"
    afile.write_text("a file")
    loop = tmp_path / "loop.zarr"
    loop.symlink_to(tmp_path / "loop2.zarr")
    (tmp_path / "loop2.zarr").symlink_to(loop)
    for target, words in ((user, "did not make"), (afile, "existing file"), (loop, "loop of symbolic links"),
                          (loop / "below.zarr", "'" + str(loop) + "' is a loop of symbolic links"),
                          (afile / "below.zarr", "is a file, not a folder")):
        assert main(["convert", str(table), "-o", str(target)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and words in err, err
    assert {name: (user / name).read_text() for name in kept} == kept and len(list(user.iterdir())) == 2
    assert afile.read_text() == "a file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.tsv", "file.zarr", "loop.zarr", "loop2.zarr", "mine.zarr"]
    store = tmp_path / "c.zarr"
    assert main(["convert", str(table), "-o", str(store)]) == 0
    assert main(["convert", str(table), "-o", str(store)]) == 0  # its own store: replaced
    (store / "notes.txt").write_text("added by the user")
    assert main(["convert", str(table), "-o", str(store)]) == 2
    assert (store / "notes.txt").read_text() == "added by the user"


def test_reference_build_refuses_a_folder_with_a_manifest_of_its_own(tmp_path, capsys):
    table = _table(tmp_path / "cohort.tsv")
    ref = tmp_path / "ref"
    kept = _user_folder(ref, **{"manifest.json": json.dumps({"project": "mine"}), "data.csv": "1,2,3"})
    assert main(["reference", "build", str(table), "-o", str(ref), "--backend", "cpu", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "did not make" in err
    assert {name: (ref / name).read_text() for name in kept} == kept and len(list(ref.iterdir())) == 2
    made = tmp_path / "made"
    assert main(["reference", "build", str(table), "-o", str(made), "--backend", "cpu", "--quiet"]) == 0
    assert main(["reference", "build", str(table), "-o", str(made), "--backend", "cpu", "--quiet"]) == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# ------------------------------------------------------------------------------------------ stale temporaries
KILL_CHILD = r'''
import os, signal, sys
import numpy as np
from gcnmops.cli import main
what, table, out, sig = sys.argv[1:]
real_save = np.save
def save(*args, **kwargs):  # the process dies while writing
    os.kill(os.getpid(), getattr(signal, sig))
    return real_save(*args, **kwargs)
np.save = save
import zarr.core
real_append = zarr.core.Array.append
def append(self, *args, **kwargs):
    os.kill(os.getpid(), getattr(signal, sig))
    return real_append(self, *args, **kwargs)
zarr.core.Array.append = append
args = ["convert", table, "-o", out] if what == "convert" else ["reference", "build", table, "-o", out,
                                                                 "--backend", "cpu", "--quiet"]
sys.exit(main(args))
'''


def _killed(what: str, table: Path, out: Path, sig: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", KILL_CHILD, what, str(table), str(out), sig], capture_output=True,
                          text=True, timeout=300, env=_env())


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_temporaries_of_killed_runs_are_removed_by_the_next_run(tmp_path):
    """SIGKILL during convert and reference build leaves their temporaries; the next run of either removes them,
    but not those of a run still going, nor a user's file of a similar name. SIGTERM cleans up at once."""
    table = _table(tmp_path / "c.tsv")
    out = tmp_path / "outs"
    out.mkdir()
    assert _killed("convert", table, out / "c.zarr", "SIGKILL").returncode == -signal.SIGKILL
    left = _hidden(out)
    assert len(left) == 1 and left[0].startswith(".c.zarr.gcnmops-") and left[0].endswith(".tmp"), left
    assert _killed("reference", table, out / "ref", "SIGKILL").returncode == -signal.SIGKILL
    left = _hidden(out)  # convert's removed by this run
    assert len(left) == 1 and left[0].startswith(".ref.gcnmops-") and left[0].endswith(".tmp"), left
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        running = files.temp_folder(out / "x.zarr").rename(
            out / f".x.zarr.gcnmops-{sleeper.pid}@{files._host()}.abcdefgh.tmp")
        (out / ".c.zarr.user.tmp").write_text("the user's file")
        assert main(["reference", "build", str(table), "-o", str(out / "ref"), "--backend", "cpu", "--quiet"]) == 0
        assert _hidden(out) == sorted([".c.zarr.user.tmp", running.name])
    finally:
        sleeper.kill()
        sleeper.wait()
    done = _killed("reference", table, out / "ref2", "SIGTERM")
    assert done.returncode == 143 and "Traceback" not in done.stderr, done.stderr[-2000:]
    # its own temporaries removed as it stopped; the one of the run that ended meanwhile too
    assert _hidden(out) == [".c.zarr.user.tmp"] and not (out / "ref2").exists()


def test_remove_stale_takes_only_dead_runs_of_this_host(tmp_path):
    host = files._host()
    dead, alive = _dead_pid(), os.getpid()
    names = [f".a.gcnmops-{dead}@{host}.abcdefgh.tmp", f".b.gcnmops-{dead}@{host}.abcdefgh.old",
             f".c.gcnmops-{alive}@{host}.abcdefgh.tmp", f".d.gcnmops-{dead}@other-host.abcdefgh.tmp",
             f".e.gcnmops-{dead}@{host}.tmp", ".f.abcdefgh.tmp"]
    for name in names:
        (tmp_path / name).mkdir()
    (tmp_path / f".g.gcnmops-{dead}@{host}.abcdefgh.tmp").symlink_to(tmp_path / names[2])
    assert files.remove_stale(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[2:] + [f".g.gcnmops-{dead}@{host}.abcdefgh.tmp"])


# ------------------------------------------------------------------------------------------ Dask work stores
def test_dask_work_stores_are_removed(tmp_path, monkeypatch):
    """A Dask run's temporary work store is gone at its end (its matrices read into the result), also when the
    run fails; ``keep_work=True`` keeps it for the result to read."""
    pytest.importorskip("dask")
    import tempfile

    from gcnmops import distributed
    from gcnmops.example import example_cohort

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    data, _ = example_cohort(n_regions=400, n_samples=5, n_cnvs=2, seed=2)
    result = distributed.cn_mops(data, client=False, backend="cpu")
    assert list(tmp_path.iterdir()) == []
    assert result.calc_integer_copy_numbers().compute().local_assessments.shape == (400, 5)
    bad = data.counts.copy()
    bad[10, 2] = -1
    with pytest.raises(InputError):
        distributed.cn_mops(bad, client=False, backend="cpu")
    assert list(tmp_path.iterdir()) == []
    kept = distributed.cn_mops(data, client=False, backend="cpu", keep_work=True)
    assert [p.name.startswith("gcnmops-dask-") for p in tmp_path.iterdir()] == [True]
    assert kept.compute().local_assessments.shape == (400, 5)


# ------------------------------------------------------------------------------------------ modes
@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_stores_are_readable_as_the_umask_says(tmp_path, mask):
    from gcnmops.example import example_cohort

    data, _ = example_cohort(n_regions=200, n_samples=3, n_cnvs=1, seed=1)
    old = os.umask(mask)
    try:
        store = save_count_data(data, tmp_path / "c.zarr")
        out = tmp_path / "out"
        assert main(["run", str(store), "-o", str(out), "--backend", "cpu", "--quiet"]) == 0
    finally:
        os.umask(old)
    for folder in (store, store / "counts", out, out / "matrices.zarr"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~mask, folder


# ------------------------------------------------------------------------------------------ archives
def _npy_header(shape: tuple, dtype=np.float64) -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                                "fortran_order": False, "shape": shape})
    return buf.getvalue()  # magic string included


def _bomb(path: Path, rows: int, cols: int = 8) -> Path:
    """An .npz whose 'counts' (rows x cols float64 zeros) inflates from a few hundred kB, written in pieces."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("counts.npy", "w", force_zip64=True) as member:
            member.write(_npy_header((rows, cols)))
            zeros = bytes(1 << 20)
            for _ in range(rows * cols * 8 >> 20):
                member.write(zeros)
    return path


def _peak(fn) -> int:
    """Bytes ``fn()`` allocated at most (through Python's and numpy's allocators)."""
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path, monkeypatch):
    bomb = _bomb(tmp_path / "bomb.npz", rows=1 << 20)  # 64 MB inflated
    assert bomb.stat().st_size < 1 << 20
    monkeypatch.setattr(npz, "available_memory", lambda: 32 << 20)  # as if 64 MB were more than there is

    def read():
        with pytest.raises(InputError, match="more than the memory available"):
            read_counts(bomb)

    assert _peak(read) < 8 << 20


def test_npy_headers_claiming_more_than_the_file_holds_are_refused(tmp_path):
    npy = tmp_path / "huge.npy"
    npy.write_bytes(_npy_header((10 ** 12, 8)) + bytes(800))
    npz = tmp_path / "huge.npz"
    with zipfile.ZipFile(npz, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("counts.npy", _npy_header((10 ** 12, 8)) + bytes(800))
    for path in (npy, npz):
        def read(path=path):
            with pytest.raises(InputError, match="the header claims an array of shape"):
                read_counts(path)

        assert _peak(read) < 8 << 20
        done = subprocess.run([sys.executable, "-m", "gcnmops", "run", str(path), "-o", str(tmp_path / "o"),
                               "--quiet"], capture_output=True, text=True, timeout=300, env=_env())
        assert done.returncode == 2 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr


# ------------------------------------------------------------------------------------------ one run per folder
def test_a_second_run_into_a_folder_being_written_is_refused(tmp_path):
    """A live run's claim on -o refuses a second run (nothing of it written, the first's temporaries kept); once
    the first is killed outright, the next run takes the folder over and leaves no lock behind."""
    table, out = _table(tmp_path / "t.tsv"), tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from gcnmops.files import lock_folder, "
                               "temp_file; from pathlib import Path; lock_folder(sys.argv[1]); "
                               "temp_file(Path(sys.argv[1]) / 'cnvs.tsv'); print('held', flush=True); time.sleep(600)",
                               str(out)], stdout=subprocess.PIPE, text=True, env=_env(), cwd=REPO)
    try:
        assert holder.stdout.readline().strip() == "held"
        second = subprocess.run([sys.executable, "-m", "gcnmops", "run", str(table), "-o", str(out), "--quiet"],
                                capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=600)
        assert second.returncode == 2 and "Traceback" not in second.stderr, second.stderr[-2000:]
        assert f"error: Another gcnmops run (process {holder.pid} on " in second.stderr, second.stderr
        assert len(_hidden(out)) == 2  # the lock and the live run's temporary: left alone
    finally:
        holder.kill()
        holder.wait()
    assert main(["run", str(table), "-o", str(out), "--quiet", "--formats", "bed"]) == 0
    assert _hidden(out) == [writers.MANIFEST] and (out / "cnvs.tsv").is_file()


# ------------------------------------------------------------------------------------------ damaged stores
@pytest.mark.parametrize("damage", ["text", "another codec"])
def test_a_damaged_zarr_chunk_is_an_error_naming_it(tmp_path, capsys, damage):
    table = _table(tmp_path / "t.tsv", m=3000, n=6)
    save_count_data(read_counts(str(table)), tmp_path / "c.zarr", rows_per_chunk=1000)
    chunks = sorted((tmp_path / "c.zarr" / "counts").glob("[0-9]*"))
    assert len(chunks) >= 2
    chunk = (tmp_path / "c.zarr" / "counts" / "1.0")
    body = chunk.read_bytes()
    chunk.write_bytes(b"not a chunk of counts\n" * 100 if damage == "text" else __import__("zlib").compress(body))
    capsys.readouterr()
    assert main(["run", str(tmp_path / "c.zarr"), "-o", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    last = err.splitlines()[-1]
    assert last.startswith("error: The Zarr array ") and "c.zarr/counts is damaged: chunk 1.0 (rows " in last, err
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------ standard output
def test_standard_output_closed_full_or_ascii_only(tmp_path):
    """The summary to a closed stdout: nothing printed, exit 0; to /dev/full: `error:` and exit 2 (the files
    complete); a non-ASCII folder name on an ASCII-only stdout: escaped, exit 0. Never a traceback."""
    table = _table(tmp_path / "t.tsv")

    def run(out: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gcnmops", "run", str(table), "-o", out, "--quiet", "--formats",
                               "bed"], stderr=subprocess.PIPE, text=True, cwd=tmp_path, timeout=600, **kw)

    closed = run("closed", env=_env(), stdout=subprocess.PIPE, preexec_fn=lambda: os.close(1))
    assert closed.returncode == 0 and "Traceback" not in closed.stderr, closed.stderr[-2000:]
    with open("/dev/full", "w") as full:
        failed = run("full", env=_env(), stdout=full)
    assert failed.returncode == 2 and "error: Cannot write to standard output: No space left on device" in \
        failed.stderr and "Traceback" not in failed.stderr, failed.stderr[-2000:]
    ascii_only = run("r\u00e9sultats", env=_env(PYTHONIOENCODING="ascii"), stdout=subprocess.PIPE)
    assert ascii_only.returncode == 0 and "r\\xe9sultats" in ascii_only.stdout, ascii_only.stderr[-2000:]
    for name in ("closed", "full", "r\u00e9sultats"):
        assert (tmp_path / name / "cnvs.tsv").is_file() and _hidden(tmp_path / name) == [writers.MANIFEST]
