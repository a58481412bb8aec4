"""Where kernels are cached: numba's own places where writable, else a writable user or temporary folder."""
from __future__ import annotations

from gcnmops import jitcache


def test_user_setting_and_writable_install_are_left_alone(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert jitcache.configure() is None
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setattr(jitcache, "_in_tree_writable", lambda: True)
    assert jitcache.configure() is None


def test_read_only_install_falls_back_to_the_first_writable_folder(monkeypatch, tmp_path):
    import numba.core.config as config

    blocked = tmp_path / "a_file"
    blocked.write_text("not a folder")  # mkdir below it fails, as in a HOME that cannot be written
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(jitcache, "_in_tree_writable", lambda: False)
    monkeypatch.setattr(jitcache, "fallback_dirs", lambda: [blocked / "cache", tmp_path / "tmpcache"])
    monkeypatch.setattr(config, "CACHE_DIR", config.CACHE_DIR)
    chosen = jitcache.configure()
    assert chosen == str(tmp_path / "tmpcache")
    import os

    assert os.environ["NUMBA_CACHE_DIR"] == chosen and config.CACHE_DIR == chosen
    monkeypatch.delenv("NUMBA_CACHE_DIR")


def test_fallback_folders_are_per_user():
    dirs = jitcache.fallback_dirs()
    assert dirs[0].name == "gcnmops" and dirs[1].name.startswith("gcnmops-")
