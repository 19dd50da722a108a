"""vdlib.utils.archive: the committed evidence archives (docs/results/archives/), their
SHA-256 list, reproducible packing and read-only paths through a zip."""

from __future__ import annotations

import gzip
import re
import zipfile
from pathlib import Path

import pytest

from vdlib.utils.archive import (
    SUMS,
    Member,
    check_sums,
    resolve,
    session_member,
    sha256,
    write_archive,
    write_sums,
)

ROOT = Path(__file__).resolve().parent.parent
ARCHIVES = ROOT / "docs" / "results" / "archives"
#: what a path may not be named after (issue 52): the GPU sessions this evidence ran on
HOLD_NAMES = re.compile(r"hold|attempt|disk_full", re.IGNORECASE)


def _files(tmp_path: Path) -> dict[str, Path]:
    src = tmp_path / "src"
    (src / "run" / "iter_1").mkdir(parents=True)
    (src / "run" / "iter_1" / "timing.json").write_text('{"proposer": 1.5}\n')
    (src / "run" / "iter_2").mkdir()
    (src / "run" / "iter_2" / "timing.json").write_text('{"proposer": 2.5}\n')
    (src / "run.log.gz").write_bytes(gzip.compress(b"line 1\r\nline 2\n", mtime=0))
    (src / "README.md").write_text("# a run\n")
    return {str(p.relative_to(src)): p for p in src.rglob("*") if p.is_file()}


def test_every_committed_archive_has_the_sha256_its_list_gives_and_the_list_names_only_them():
    assert sorted(ARCHIVES.glob("*.zip")), "no archive committed"
    assert check_sums(ARCHIVES) == []


def test_no_committed_archive_member_is_named_after_a_gpu_hold():
    for archive in sorted(ARCHIVES.glob("*.zip")):
        with zipfile.ZipFile(archive) as zf:
            named = [n for n in zf.namelist() if HOLD_NAMES.search(n)]
        assert named == [], archive.name


def test_packing_is_reproducible_whatever_the_order_and_the_files_times(tmp_path):
    files = _files(tmp_path)
    a = write_archive(files, tmp_path / "a.zip")
    for p in files.values():  # other timestamps, other insertion order: the same bytes
        p.touch()
    b = write_archive(dict(reversed(list(files.items()))), tmp_path / "b.zip")
    assert a == b == sha256(tmp_path / "a.zip")
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.zip") as zf:
        assert zf.namelist() == sorted(files)
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    assert not (tmp_path / "a.zip.tmp").exists()


def test_a_committed_archive_repacked_from_its_own_members_is_the_same_bytes(tmp_path):
    """Reproducible: what the archive holds, packed again, gives the committed SHA-256."""
    archive = min(ARCHIVES.glob("*.zip"), key=lambda p: p.stat().st_size)
    members = {m.member: m.read_bytes() for m in Member(archive).walk()}
    assert len(members) > 1
    assert write_archive(members, tmp_path / archive.name) == sha256(archive)


def test_a_member_name_that_leaves_the_archive_is_refused(tmp_path):
    f = tmp_path / "x"
    f.write_text("x")
    with pytest.raises(ValueError, match="without '..'"):
        write_archive({"../x": f}, tmp_path / "a.zip")


def test_a_path_through_an_archive_reads_like_a_folder(tmp_path):
    write_archive(_files(tmp_path), tmp_path / "exp.zip")
    run = resolve(tmp_path / "exp.zip" / "run")
    assert isinstance(run, Member) and run.is_dir() and not run.is_file()
    assert [p.name for p in run.iterdir()] == ["iter_1", "iter_2"]
    assert [str(p) for p in run.glob("iter_*/timing.json")] == [
        f"{tmp_path}/exp.zip/run/iter_{t}/timing.json" for t in (1, 2)]
    timing = run / "iter_2" / "timing.json"
    assert timing.read_text() == '{"proposer": 2.5}\n' and timing.suffix == ".json"
    assert timing.parent.name == "iter_2" and timing.stem == "timing"
    log = resolve(f"{tmp_path}/exp.zip/run.log.gz")
    with log.open("rb") as raw, gzip.open(raw, "rt") as fh:
        assert fh.read() == "line 1\nline 2\n"  # universal newlines, as open(path, "rt")
    root = resolve(tmp_path / "exp.zip")
    assert isinstance(root, Member) and root.is_dir()
    assert sorted(p.name for p in root.iterdir()) == ["README.md", "run", "run.log.gz"]
    assert not (root / "nothing").exists()
    assert [m.member for m in root.walk()] == [
        "README.md", "run.log.gz", "run/iter_1/timing.json", "run/iter_2/timing.json"]
    assert [m.member for m in run.walk()] == ["run/iter_1/timing.json", "run/iter_2/timing.json"]
    assert resolve(tmp_path / "exp.zip" / "README.md") == root / "README.md"


def test_a_session_is_found_in_whichever_of_its_experiments_archives_holds_it(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    write_archive({"s1/a.txt": tmp_path / "f.txt"}, tmp_path / "exp.zip")
    write_archive({"s2/r/b.txt": tmp_path / "f.txt"}, tmp_path / "exp_s2_s3.zip")
    write_archive({"s3/c.txt": tmp_path / "f.txt"}, tmp_path / "other_s3.zip")
    assert session_member(tmp_path, "exp", "s1/a.txt") == Member(tmp_path / "exp.zip", "s1/a.txt")
    found = session_member(tmp_path, "exp", "s2/r")
    assert found == Member(tmp_path / "exp_s2_s3.zip", "s2/r") and found.is_dir()
    with pytest.raises(FileNotFoundError, match="holds s3/.*exp.zip, exp_s2_s3.zip"):
        session_member(tmp_path, "exp", "s3/c.txt")  # another experiment's archive is not looked in


def test_a_plain_path_stays_a_path():
    assert resolve("docs/results/gpu_small_main.json") == Path("docs/results/gpu_small_main.json")
    assert isinstance(resolve("no/such/thing.zip/x"), Path)  # no such archive: a path


def test_a_member_is_read_only_and_a_missing_one_is_named(tmp_path):
    write_archive(_files(tmp_path), tmp_path / "exp.zip")
    readme = Member(tmp_path / "exp.zip", "README.md")
    with pytest.raises(ValueError, match="allowed: r, rt, rb"):
        readme.open("w")
    with pytest.raises(FileNotFoundError, match="run/iter_9/timing.json"):
        (Member(tmp_path / "exp.zip") / "run/iter_9/timing.json").read_text()
    with pytest.raises(NotADirectoryError):
        list(readme.iterdir())


def test_the_sum_list_names_a_changed_an_unlisted_and_a_missing_archive(tmp_path):
    files = _files(tmp_path)
    folder = tmp_path / "archives"
    folder.mkdir()
    write_archive(files, folder / "a.zip")
    write_archive({"one": files["README.md"]}, folder / "b.zip")
    write_sums(folder)
    assert check_sums(folder) == []
    lines = (folder / SUMS).read_text().splitlines()
    assert [line.split("  ")[1] for line in lines] == ["a.zip", "b.zip"]
    write_archive({"two": files["README.md"]}, folder / "b.zip")  # changed after the list
    write_archive(files, folder / "c.zip")  # never listed
    (folder / "a.zip").unlink()
    problems = check_sums(folder)
    assert problems[0] == "c.zip: present but not in SHA256SUMS"
    assert problems[1] == "a.zip: in SHA256SUMS but absent"
    assert problems[2].startswith("b.zip: SHA-256 ") and len(problems) == 3
    (folder / SUMS).write_text("not a digest  b.zip\n")
    assert "not '<sha256>  <name>'" in check_sums(folder)[0]


def test_a_session_joins_its_experiments_archive_once_and_not_under_a_hold_name(tmp_path):
    """tools/lent-gpus/archive_session.py: an imported session folder goes into the archive
    under the name given, the list follows; the name again, or a hold's name, is refused."""
    from _script_loader import load_script

    tool = load_script("tools/lent-gpus/archive_session.py")
    files = _files(tmp_path)
    archives = tmp_path / "archives"
    archives.mkdir()
    session = tmp_path / "src"
    tool.add_session("exp", session, "h200x1_2026-12-01", archives)
    first = sha256(archives / "exp.zip")
    tool.add_session("exp", session, "h100x1_2026-12-02", archives)
    assert check_sums(archives) == [] and sha256(archives / "exp.zip") != first
    names = [m.member for m in Member(archives / "exp.zip").walk()]
    assert len(names) == 2 * len(files)
    assert "h200x1_2026-12-01/run/iter_2/timing.json" in names
    with pytest.raises(SystemExit, match="already has h200x1_2026-12-01/"):
        tool.add_session("exp", session, "h200x1_2026-12-01", archives)
    with pytest.raises(SystemExit, match="not a hold"):
        tool.add_session("exp", session, "hold_h200x1", archives)
    assert [m.member for m in Member(archives / "exp.zip").walk()] == names  # untouched
