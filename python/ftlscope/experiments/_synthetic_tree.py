"""A synthetic source tree and its history, generated deterministically from a seed, shaped like the Linux
kernel repository "Solid State Disks vs Magnetic Disks: Making the right choice" (§4.3) checked out: almost
29,000 files in just under 1,800 directories, 160 tags in order.

The shape (docs/experiments.md, "git-checkout"):

- Directories: a random recursive tree (each directory's parent drawn uniformly from the directories made
  before it), so the depth grows like ln(dirs) (about 8 for 1,800) with a few wide directories near the top.
- Files: every directory gets one file (git keeps no empty directory), the rest go to directories by
  lognormal weights (sigma 1.2): most directories hold a handful, a few hold hundreds, as in drivers/.
- Sizes: lognormal, median 5 KiB, sigma 1.3 (mean about 12 KiB, at most 2 MiB), about 340 MB for 30,000
  files: ftlscope's assumption for a kernel source tree of the thesis's time (it gives the file and directory
  counts, and "just over 750 MB" for its clone without saying how much of that is history).
- History: snapshot 0 is the tree; each of the ``tags`` snapshots after it changes ``change_share`` of the
  files then present: 85 % of the changes rewrite a file (a new version, size within about 10 %), 10 % add a
  file, 5 % delete one.
- Contents: lines drawn from a vocabulary of 256 text-like lines (indented, 4-72 letters), so that zlib packs
  them to about 40 %, near what it does to C source, per (file, version) from its own seeded stream: a file's
  content does not depend on the order anything is generated in.

The repository is made with one ``git fast-import`` stream (fixed author, dates and messages, so the same
seed gives the same commit ids), never a git command per file.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import RunError

KiB = 1 << 10
MiB = 1 << 20
MEDIAN_SIZE = 5 * KiB
SIZE_SIGMA = 1.3
MAX_SIZE = 2 * MiB
DIR_WEIGHT_SIGMA = 1.2
# Of the files changed between two tags: rewritten, added, deleted.
MODIFY, ADD = 0.85, 0.10
ALPHABET = np.frombuffer(b"etaoinshrdlcumwfgypbvk_(){};=* ", dtype=np.uint8)
VOCABULARY = 256
EPOCH = 1_230_768_000  # 2009-01-01, the thesis's year; commit dates are one day apart from it
_STREAM = {"dirs": 1, "files": 2, "history": 3, "order": 4, "vocabulary": 5}


@dataclass(frozen=True)
class TreeShape:
    """How many files, directories and tags, the share changed per tag, and the seed."""

    files: int
    dirs: int
    tags: int = 0
    change_share: float = 0.0
    seed: int = 1

    def describe(self) -> str:
        text = f"{self.files:,} files in {self.dirs:,} directories"
        if self.tags:
            text += f", {self.tags} tags after the first, {self.change_share:.1%} of the files changed per tag"
        return f"{text} (seed {self.seed}; the thesis's kernel tree: almost 29,000 files in just under 1,800 " \
               f"directories{', 160 tags' if self.tags else ''})"


@dataclass
class Snapshot:
    """One tag's changes: file id -> (path, size, version) written, and the paths deleted."""

    written: dict[int, tuple[str, int, int]] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)


def _rng(shape: TreeShape, *key: int) -> np.random.Generator:
    return np.random.default_rng([shape.seed, *key])


def _sizes(rng: np.random.Generator, n: int) -> np.ndarray:
    sizes = rng.lognormal(np.log(MEDIAN_SIZE), SIZE_SIGMA, n)
    return np.clip(sizes, 1, MAX_SIZE).astype(np.int64)


def directories(shape: TreeShape) -> list[str]:
    """The directories' paths, relative to the tree's root ("" is the root; ``dirs`` more after it)."""
    rng = _rng(shape, _STREAM["dirs"])
    paths = [""]
    # parent of directory i (1..dirs) drawn uniformly from 0..i-1: a random recursive tree
    parents = (rng.random(shape.dirs) * np.arange(1, shape.dirs + 1)).astype(np.int64)
    for i, parent in enumerate(parents, start=1):
        base = paths[parent]
        paths.append(f"{base}/d{i:04d}" if base else f"d{i:04d}")
    return paths


def _dir_weights(shape: TreeShape) -> np.ndarray:
    weights = _rng(shape, _STREAM["dirs"], 1).lognormal(0.0, DIR_WEIGHT_SIGMA, shape.dirs + 1)
    return weights / weights.sum()


def initial_files(shape: TreeShape) -> dict[int, tuple[str, int, int]]:
    """Snapshot 0: file id -> (path, size, version 0)."""
    dirs = directories(shape)
    rng = _rng(shape, _STREAM["files"])
    # One file in every directory first (git keeps no empty directory), the rest by the directories' weights.
    home = np.arange(len(dirs)) if shape.files >= len(dirs) else rng.permutation(len(dirs))[: shape.files]
    rest = shape.files - len(home)
    if rest > 0:
        home = np.concatenate([home, rng.choice(len(dirs), rest, p=_dir_weights(shape))])
    sizes = _sizes(rng, shape.files)
    return {i: (_path(dirs[d], i), int(s), 0) for i, (d, s) in enumerate(zip(home, sizes, strict=True))}


def _path(directory: str, file_id: int) -> str:
    name = f"f{file_id:06d}.c"
    return f"{directory}/{name}" if directory else name


def history(shape: TreeShape) -> Iterator[Snapshot]:
    """Snapshot 0 (every file) and then one per tag: what each writes and deletes."""
    live = initial_files(shape)
    yield Snapshot(written=dict(live))
    dirs = directories(shape)
    weights = _dir_weights(shape)
    next_id = shape.files
    for tag in range(1, shape.tags + 1):
        rng = _rng(shape, _STREAM["history"], tag)
        ids = np.fromiter(live, dtype=np.int64, count=len(live))
        changed = min(len(ids), max(1, round(shape.change_share * len(ids))))
        chosen = rng.choice(ids, changed, replace=False)
        kinds = rng.random(changed)
        snap = Snapshot()
        for file_id, kind in zip(chosen.tolist(), kinds.tolist(), strict=True):
            path, size, version = live[file_id]
            if kind < MODIFY:
                new_size = max(1, min(MAX_SIZE, int(size * rng.lognormal(0.0, 0.1))))
                live[file_id] = snap.written[file_id] = (path, new_size, version + 1)
            elif kind < MODIFY + ADD:
                directory = dirs[int(rng.choice(len(dirs), p=weights))]
                live[next_id] = snap.written[next_id] = (_path(directory, next_id), int(_sizes(rng, 1)[0]), 0)
                next_id += 1
            elif len(live) > 1:
                del live[file_id]
                snap.deleted.append(path)
        yield snap


@functools.lru_cache(maxsize=4)
def _vocabulary(seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, _STREAM["vocabulary"]])
    lines = [b"\t" * int(rng.integers(0, 4)) + ALPHABET[rng.integers(0, len(ALPHABET), int(rng.integers(4, 73)))]
             .tobytes() + b"\n" for _ in range(VOCABULARY)]
    return np.array(lines, dtype=object)


def content(shape: TreeShape, file_id: int, version: int, size: int) -> bytes:
    """The bytes of ``file_id``'s ``version``: text-like, from its own stream (independent of generation order)."""
    vocabulary = _vocabulary(shape.seed)
    rng = _rng(shape, _STREAM["files"], file_id, version)
    data = b""
    while len(data) < size:
        data += b"".join(vocabulary[rng.integers(0, VOCABULARY, size // 24 + 8)])
    return data[:size]


def tag_name(index: int) -> str:
    return f"v{index:04d}"


# ---------------------------------------------------------------------------------------------------------
# a git repository


def git_program() -> str | None:
    return shutil.which("git")


def _git_env() -> dict[str, str]:
    # No user or system configuration (a hook, a global core.fsync or a template) changes what is measured.
    return {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"}


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([git_program() or "git", "-C", str(repo), *args], capture_output=True, text=True,
                          env=_git_env())
    if check and done.returncode != 0:
        raise RunError(f"git {' '.join(args)} failed: {(done.stderr or done.stdout).strip()[:300]}")
    return done


def _fast_import_stream(shape: TreeShape, write) -> int:
    """Feed ``write`` the fast-import commands of the whole history; the number of blob bytes."""
    total = 0
    mark = 0
    for index, snap in enumerate(history(shape)):
        lines = []
        for file_id, (path, size, version) in sorted(snap.written.items(), key=lambda item: item[1][0]):
            mark += 1
            data = content(shape, file_id, version, size)
            write(b"blob\nmark :%d\ndata %d\n" % (mark, len(data)))
            write(data)
            write(b"\n")
            total += len(data)
            lines.append(b"M 100644 :%d %s\n" % (mark, path.encode()))
        lines.extend(b"D %s\n" % path.encode() for path in sorted(snap.deleted))
        message = f"snapshot {index}\n".encode()
        when = EPOCH + 86400 * index
        write(b"commit refs/heads/main\n")
        write(b"committer ftlscope <ftlscope@example.invalid> %d +0000\n" % when)
        write(b"data %d\n%s" % (len(message), message))
        write(b"".join(lines))
        write(b"\n")
        write(b"reset refs/tags/%s\nfrom refs/heads/main\n\n" % tag_name(index).encode())
    write(b"done\n")
    return total


def make_repository(repo: Path, shape: TreeShape) -> int:
    """A git repository at ``repo`` (created) holding the history, its working tree empty; tags
    ``v0000``..``v{tags}``. Returns the bytes of file contents imported."""
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "--quiet", "--initial-branch=main")
    # No automatic repacking in the middle of the checkouts; no detached-HEAD advice on every tag.
    git(repo, "config", "gc.auto", "0")
    git(repo, "config", "advice.detachedHead", "false")
    proc = subprocess.Popen([git_program() or "git", "-C", str(repo), "fast-import", "--quiet", "--done"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=_git_env())
    assert proc.stdin is not None
    try:
        total = _fast_import_stream(shape, proc.stdin.write)
        proc.stdin.close()
    except BrokenPipeError:
        total = 0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.wait() != 0:
        raise RunError(f"git fast-import failed: {err.strip()[:300]}")
    return total


# ---------------------------------------------------------------------------------------------------------
# the tree written directly


def write_tree(root: Path, shape: TreeShape) -> tuple[int, int]:
    """Snapshot 0's files under ``root``, created in a shuffled order (seeded): a tree whose files were written
    over time, in no relation to where they sit in it, as the files of a tree that has lived a while (the
    thesis's "as the file system ages"). Returns (files, bytes)."""
    files = initial_files(shape)
    order = _rng(shape, _STREAM["order"]).permutation(len(files))
    ids = list(files)
    total = 0
    root.mkdir(parents=True, exist_ok=True)  # files live in the root too, and one may come first
    made: set[str] = set()
    for i in order.tolist():
        file_id = ids[i]
        path, size, version = files[file_id]
        parent = os.path.dirname(path)
        if parent and parent not in made:
            (root / parent).mkdir(parents=True, exist_ok=True)
            made.add(parent)
        (root / path).write_bytes(content(shape, file_id, version, size))
        total += size
    return len(files), total
