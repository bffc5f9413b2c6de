"""Report paths that are not plain files: a FIFO, a symlink, a character device are written
through, never replaced; a regular file is still replaced atomically; `-` is standard output
for run's single-file reports."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest
from helpers import cli
from test_run import cases

from conformance.files import write_atomic


def null_device(path: Path) -> Path:
    """A character device like /dev/null (1, 3) at `path`, or skip where mknod is refused."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError as error:
        reason = f"cannot make a character device here: {error}"
        print(reason)
        pytest.skip(reason)
    return path


def test_a_fifo_is_written_into_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as source:
            got.append(source.read())  # to EOF: the writer closed its end

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    data = b"{}\n" * 50_000  # more than a pipe buffer: the reader drains it as it goes
    write_atomic(fifo, data)
    reader.join(timeout=10)
    assert not reader.is_alive() and got == [data]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.fifo"]


def test_a_symlink_stays_a_link_and_its_target_gets_the_bytes(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "report.json"
    target.write_bytes(b"old")
    link = tmp_path / "report.json"
    link.symlink_to(Path("real") / "report.json")  # relative, as `ln -s` often makes them
    write_atomic(link, b"new")
    assert link.is_symlink() and os.readlink(link) == str(Path("real") / "report.json")
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["report.json"]


def test_a_dangling_symlink_gets_its_target_created(tmp_path: Path) -> None:
    link = tmp_path / "report.json"
    target = tmp_path / "out" / "report.json"
    link.symlink_to(target)
    write_atomic(link, b"created")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == b"created"


def test_a_character_device_is_written_in_place(tmp_path: Path) -> None:
    device = null_device(tmp_path / "null")
    write_atomic(device, b"into the void")
    write_atomic(device, b"again", sync=False)
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert os.lstat(device).st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_a_symlink_to_a_device_is_followed_not_replaced(tmp_path: Path) -> None:
    device = null_device(tmp_path / "null")
    link = tmp_path / "stdout"
    link.symlink_to(device)
    write_atomic(link, b"through the link")
    assert link.is_symlink() and stat.S_ISCHR(os.lstat(device).st_mode)


def test_a_regular_file_is_still_replaced_atomically(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(b"old")
    old = tmp_path / "old-link"
    os.link(path, old)  # a second name for the old inode
    write_atomic(path, b"new")
    # A new inode was renamed over the name: the old one, still linked, is untouched.
    assert path.read_bytes() == b"new" and old.read_bytes() == b"old"
    assert os.stat(path).st_ino != os.stat(old).st_ino
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old-link", "report.json"]


def test_run_writes_a_device_report_in_place(tmp_path: Path) -> None:
    device = null_device(tmp_path / "null")
    done = cli("run", "--cases", cases(tmp_path), "--json", str(device))
    assert done.returncode == 0, done.stderr
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert f"wrote {device}" in done.stderr


def test_run_json_to_dev_null_leaves_it_a_device(tmp_path: Path) -> None:
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    done = cli("run", "--cases", cases(tmp_path), "--json", "/dev/null")
    assert done.returncode == 0, done.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert os.stat("/dev/null").st_rdev == os.makedev(1, 3)
    assert not [p for p in os.listdir("/dev") if p.startswith(".null.")]


def test_run_json_dash_prints_the_report_on_stdout(tmp_path: Path) -> None:
    done = cli("run", "--cases", cases(tmp_path), "--json", "-")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # the report alone: nothing else on stdout
    assert [(c["id"], c["version"]) for c in report["cases"]] == [
        ("receipts.send-gets-receipt", "1.1"), ("receipts.send-gets-receipt", "1.2")]
    assert "passed" in done.stderr  # the console stays on stderr
    assert "wrote" not in done.stderr
    assert not (tmp_path / "-").exists() and not Path("-").exists()


def test_two_reports_on_stdout_exit_2_with_one_line(tmp_path: Path) -> None:
    done = cli("run", "--cases", cases(tmp_path), "--json", "-", "--junit", "-")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--json, --junit" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
