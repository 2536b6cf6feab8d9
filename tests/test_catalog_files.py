"""Reading catalog files: the exact line of a mistake, YAML that is refused (duplicate keys, aliases, huge or
deeply nested files), odd directory entries, and keeping unchanged tools across a ConfigMap update."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from toolhost.v1 import tool_service_pb2
from toolhost_server.api.convert import ToolMessages
from toolhost_server.catalog import directory_listing
from toolhost_server.catalog.loader import ToolLoader
from toolhost_server.catalog.strict_yaml import MAX_NESTING
from toolhost_server.catalog.yaml_files import MAX_FILE_BYTES
from toolhost_server.registry import CatalogProblem, Registry
from toolhost_server.runners import RunnerSettings

from helpers.catalogs import make_configmap, write_tool

RELOAD = tool_service_pb2.ReloadRequest()


def load(directory: Path) -> tuple[list[str], dict[str, CatalogProblem]]:
    """The tool names (built-ins left out) and the problems by file name, as the server's loader sees them."""
    result = ToolLoader([directory], (), RunnerSettings()).load()
    assert result.tools is not None, result.problems
    names = [name for name, tool in result.tools.items() if tool.spec.origin.startswith(str(directory))]
    return names, {Path(p.file).name: p for p in result.problems}


def only_problem(directory: Path) -> CatalogProblem:
    _, problems = load(directory)
    assert len(problems) == 1, problems
    return next(iter(problems.values()))


HEAD = "name: x\ndescription: d\n"


@pytest.mark.parametrize(
    ("body", "line", "reason"),
    [
        pytest.param(HEAD + "parameters:\n  - name: a\n    type: string\n  - name: b\n    type: integer\n"
                     "  - name: c\n    type: str\n", 9, "has type 'str'", id="type-of-the-third-parameter"),
        pytest.param(HEAD + "parameters:\n  - {name: m, type: string}\n  - {name: n, type: integer, default: abc}\n",
                     5, "default 'abc' is invalid", id="default-in-a-flow-mapping"),
        pytest.param(HEAD + "parameters:\n  - name: host\n  - name: port\n    type: integer\n  - name: host\n",
                     7, "'host' is declared twice", id="parameter-declared-twice"),
        pytest.param(HEAD + "parameters:\n  - name: a\n  - type: string\n", 5, "parameter #2 needs a `name`",
                     id="parameter-without-name"),
        pytest.param(HEAD + "parameters:\n  - name: a\n    maximum: 3\n  - name: b\n    maximun: 3\n", 7,
                     "did you mean 'maximum'", id="unknown-key-in-a-parameter"),
        pytest.param(HEAD + "parameters: [{name: n, type: integer}]\nexamples:\n  - {description: ok, parameters: "
                     "{n: 1}}\n  - description: bad\n    parameters: {n: abc}\n", 7, "does not fit the parameters",
                     id="second-example"),
        pytest.param(HEAD + "implementation: echo\nintents:\n  - 'dns'\n  - 'dns lookup (?P<domain'\n", 6,
                     "regular expression", id="second-intent"),
        pytest.param(HEAD + "implementation: echo\nannotations:\n  read_only: true\n  idempotent: maybe\n", 6,
                     "annotations.idempotent", id="annotation"),
        pytest.param(HEAD + "implementation: echo\ntags: [a,\n  3]\n", 5, "list of non-empty strings",
                     id="tag-on-a-continuation-line"),
        pytest.param("# A comment first.\n\nname: x\n", 3, "`description` is required", id="missing-top-level-key"),
        pytest.param(HEAD + "runner:\n  type: teleport\n", 4, "unknown runner type", id="runner-refused-by-loader"),
        # Found by tests/fuzz/test_fuzz_catalog_yaml.py: each loaded and then broke the start or a Reload, or
        # escaped as an exception with no line.
        pytest.param(HEAD + "implementation: echo\ntimeout_seconds: .nan\n", 4, "positive, finite number",
                     id="timeout-nan"),
        pytest.param(HEAD + "implementation: echo\ntimeout_seconds: .inf\n", 4, "positive, finite number",
                     id="timeout-infinite"),
        pytest.param(HEAD + "implementation: echo\nversion: !!timestamp x\n", 4, "as tag:yaml.org,2002:timestamp",
                     id="tag-its-constructor-cannot-read"),
        pytest.param(HEAD + "implementation: echo\nversion: 0x" + "f" * 5000 + "\n", 4, "must fit in 64 bits",
                     id="hex-number-too-long-to-print"),
        pytest.param(HEAD + "implementation: echo\nintents:\n  - 'a{2000}'\n", 5, "invalid repetition size",
                     id="intent-repetition-over-re2s-limit"),
        pytest.param(HEAD + "parameters:\n  - name: a\n  - name: b\n    pattern: '['\n", 5,
                     "parameter 'b' is not a valid JSON Schema", id="pattern-that-does-not-compile"),
    ],
)
def test_a_mistake_is_reported_at_its_own_line(tmp_path, body, line, reason):
    write_tool(tmp_path, "x", body)
    problem = only_problem(tmp_path)
    assert reason in problem.reason and problem.line == line, problem


async def test_reload_reports_the_line_inside_a_flow_mapping(start_server, tmp_path):
    write_tool(tmp_path, "good")
    write_tool(tmp_path, "flow", "name: flow\ndescription: d\nimplementation: echo\nparameters:\n"
               "  - {name: text, type: string}\n  - {name: n, type: integer, default: abc}\n")
    server = await start_server(catalog_dirs=[tmp_path])
    errors = (await server.stub.Reload(RELOAD)).errors
    assert [(Path(e.file).name, e.line) for e in errors] == [("flow.yaml", 6)]


# -- YAML a catalog file may not use ------------------------------------------------------------------------------


def test_a_duplicate_key_is_refused_at_its_second_occurrence(tmp_path):
    write_tool(tmp_path, "dup", "name: first_name\ndescription: d\nimplementation: echo\nname: second_name\n")
    write_tool(tmp_path, "flowdup", HEAD + "implementation: echo\nparameters:\n"
               "  - {name: a, type: string, type: integer}\n")
    names, problems = load(tmp_path)
    assert names == []
    assert problems["dup.yaml"].line == 4 and "'name' appears twice" in problems["dup.yaml"].reason
    assert "first on line 1" in problems["dup.yaml"].reason
    assert problems["flowdup.yaml"].line == 5 and "'type' appears twice" in problems["flowdup.yaml"].reason


def test_an_alias_bomb_is_refused(tmp_path):
    # Ten to the fourth strings from a few hundred bytes; each further level multiplies by ten.
    levels = ["  - {name: p0, type: array, default: &a0 [x, x, x, x, x, x, x, x, x, x]}"]
    for level in range(1, 5):
        refs = ", ".join([f"*a{level - 1}"] * 10)
        levels.append(f"  - {{name: p{level}, type: array, default: &a{level} [{refs}]}}")
    write_tool(tmp_path, "bomb", HEAD + "parameters:\n" + "\n".join(levels) + "\n")
    problem = only_problem(tmp_path)
    assert "aliases" in problem.reason and problem.line == 4, problem


def test_anchors_without_aliases_and_merge_keys(tmp_path):
    write_tool(tmp_path, "anchored", "name: anchored\ndescription: &d An anchor alone is harmless.\n"
               "implementation: echo\n")
    write_tool(tmp_path, "merged", "name: merged\ndescription: d\nimplementation: echo\n"
               "annotations: {<<: {read_only: true}}\n")
    names, problems = load(tmp_path)
    assert names == ["anchored"]
    assert problems["merged.yaml"].line == 4 and "merge keys" in problems["merged.yaml"].reason


def test_a_file_over_the_size_cap_is_refused(tmp_path):
    path = write_tool(tmp_path, "big", HEAD + "implementation: echo\n")
    with path.open("a") as handle:
        handle.write("# padding\n" * (MAX_FILE_BYTES // 10))
    problem = only_problem(tmp_path)
    assert "larger than 1 MiB" in problem.reason, problem


def test_deep_nesting_is_refused_without_crashing(tmp_path):
    # Deep enough to overflow the C stack of libyaml's recursive composer; run apart so a crash is a failure.
    write_tool(tmp_path, "deep", HEAD + "implementation: echo\ntags: " + "[" * 100_000 + "]" * 100_000 + "\n")
    write_tool(tmp_path, "deepish", HEAD + "implementation: echo\ntags:\n" + "".join(
        "  " * level + "- \n" for level in range(MAX_NESTING + 5)))
    script = textwrap.dedent(f"""
        from pathlib import Path
        from test_catalog_files import load
        names, problems = load(Path({str(tmp_path)!r}))
        for name, problem in sorted(problems.items()):
            print(name, problem.line, problem.reason)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("deep.yaml 4 ") and f"nests deeper than {MAX_NESTING}" in lines[0]
    assert lines[1].startswith(f"deepish.yaml {4 + MAX_NESTING} ") and "nests deeper" in lines[1]


def test_a_value_yaml_cannot_construct_is_a_bad_file(tmp_path):
    write_tool(tmp_path, "good")
    write_tool(tmp_path, "date", HEAD + "implementation: echo\nversion: 2024-13-45\n")
    names, problems = load(tmp_path)
    assert names == ["good"]
    assert problems["date.yaml"].line == 4 and "month must be in 1..12" in problems["date.yaml"].reason


# -- directory entries ---------------------------------------------------------------------------------------------


async def test_a_symlink_loop_is_one_bad_file_not_a_failed_reload(start_server, tmp_path):
    write_tool(tmp_path, "good")
    (tmp_path / "loop.yaml").symlink_to("loop.yaml")
    server = await start_server(catalog_dirs=[tmp_path])
    report = await server.stub.Reload(RELOAD)
    assert report.success and "good" in report.tools
    assert [(Path(e.file).name, e.line) for e in report.errors] == [("loop.yaml", 0)]
    assert "symbolic links" in report.errors[0].reason


def test_a_file_replaced_by_a_symlink_loop_keeps_its_last_good_version(tmp_path):
    path = write_tool(tmp_path, "steady")
    loader = ToolLoader([tmp_path], (), RunnerSettings())
    assert loader.load().tools is not None
    path.unlink()
    path.symlink_to(path.name)
    result = loader.load()
    assert result.tools is not None and "steady" in result.tools
    assert [p.file for p in result.problems] == [str(path)]
    assert "still serving its last good version" in result.problems[0].reason


def test_a_directory_named_like_a_yaml_file_is_searched(tmp_path):
    write_tool(tmp_path / "nested.yaml", "inner")
    write_tool(tmp_path, "outer")
    names, problems = load(tmp_path)
    assert sorted(names) == ["inner", "outer"] and problems == {}


def test_a_file_that_is_not_utf8_is_a_bad_file(tmp_path):
    write_tool(tmp_path, "good")
    (tmp_path / "latin1.yaml").write_bytes(b"name: latin1\ndescription: caf\xe9\n")
    names, problems = load(tmp_path)
    assert names == ["good"]
    assert "not UTF-8" in problems["latin1.yaml"].reason and problems["latin1.yaml"].line == 2


# -- keeping unchanged tools ---------------------------------------------------------------------------------------


def tool_text(name: str, greeting: str = "Hello") -> str:
    return (f"name: {name}\ndescription: {greeting} tool {name}.\n"
            "runner: {type: python, entrypoint: 'toolhost_server.tools.samples:greet'}\n"
            "parameters:\n  - {name: name, type: string, required: true}\n")


async def test_a_configmap_update_keeps_the_unchanged_tools(start_server, tmp_path):
    root = tmp_path / "configmap"
    files = {f"{name}.yaml": tool_text(name) for name in ("one", "two", "three")}
    make_configmap(root, 1, files)
    server = await start_server(catalog_dirs=[root])
    before = {name: server.toolhost.registry.snapshot.get(name).spec for name in ("one", "two", "three")}
    make_configmap(root, 2, {**files, "two.yaml": tool_text("two", "Changed")})
    report = await server.stub.Reload(RELOAD)
    assert list(report.changed) == ["two"] and not report.errors
    snapshot = server.toolhost.registry.snapshot
    assert snapshot.get("one").spec is before["one"] and snapshot.get("three").spec is before["three"]
    assert snapshot.get("two").spec is not before["two"]


async def test_an_edit_that_changes_nothing_keeps_the_tool(start_server, tmp_path):
    # Another tool changes each time, so every reload makes a new generation that could replace `steady`.
    path = write_tool(tmp_path, "steady", tool_text("steady"))
    write_tool(tmp_path, "other", tool_text("other", "First"))
    server = await start_server(catalog_dirs=[tmp_path])
    spec = server.toolhost.registry.snapshot.get("steady").spec
    path.write_text("# Only a comment is new.\n" + tool_text("steady"))
    write_tool(tmp_path, "other", tool_text("other", "Second"))
    report = await server.stub.Reload(RELOAD)
    assert list(report.changed) == ["other"] and server.toolhost.registry.snapshot.get("steady").spec is spec
    path.write_text("name: steady\ndescription: [broken\n")
    assert (await server.stub.Reload(RELOAD)).errors
    path.write_text(tool_text("steady") + "# Fixed again.\n")
    write_tool(tmp_path, "other", tool_text("other", "Third"))
    report = await server.stub.Reload(RELOAD)
    assert list(report.changed) == ["other"] and not report.errors
    assert server.toolhost.registry.snapshot.get("steady").spec is spec


# -- the fast paths: reading many files quickly must not change what is read -----------------------------------

# Documents the fast reader takes itself (plain data) and ones it must leave to the full constructor (tags,
# aliases, merge keys, duplicate keys, deep nesting, values the constructors refuse), which gives the error.
YAML_CASES = [
    "a: yes\nb: No\nc: on\nd: OFF\ne: y\nf: n\ng: true\nh: False\ni: tRUe\n",
    "a: 0x1F\nb: 0o17\nc: 017\nd: 1_000\ne: 1:30\nf: -0b101\ng: +12\nh: 0\ni: -0\nj: 08\nk: 9999999999999999999999\n",
    "a: .inf\nb: -.Inf\nc: 1e3\nd: 6.8523015e+5\ne: 1.5\nf: -1_0.5\ng: 190:20:30.15\nh: 1.\ni: .5\n",
    "a: ~\nb: null\nc:\nd: Null\ne: NULL\n", "", "# only a comment\n", "---\n", "--- a\n", "[1, 2]\n",
    "a: \"123\"\nb: 'true'\nc: !!int \"5\"\nd: !!str 5\ne: !!float 1\nf: !!bool yes\ng: !!null ''\n",
    "a: 2024-01-01\nb: 2001-12-14t21:59:43.10-05:00\n", "a: !!binary aGVsbG8=\n", "a: !!set {x, y}\n",
    "a: !foo bar\n", "a: &x 1\nb: *x\n", "a: &x [1]\nb: *x\n", "base: &b {x: 1}\nm: {<<: *b, y: 2}\n",
    "a: 1\na: 2\n", "{1: a, 1.0: b}\n", "{true: a, 1: b}\n", "? [a, b]\n: c\n", "a: =\n", "a: !!int abc\n",
    "a: !!bool maybe\n", "a: !!str [1]\n", "a: !!map [1]\n", "a: " + "[" * 70 + "]" * 70 + "\n",
    "a: " + "[" * 64 + "]" * 64 + "\n", "a: 'x'\nb: \"y\\n\\u00e9\"\nc: |\n  line\n  two\nd: >\n  fold\n  ed\n",
    "a: 1\n---\nb: 2\n", "a:\n  - b: 1\n    c: [x, y]\n  - d\n", "&r [*r]\n", "a: -\nb: .\nc: <<\nd: ---\n",
    "name: t\ndescription: A long description that is certainly longer than any interned value.\n",
    "glob: '*.txt'\nnote: a*b\n", "&k a: 1\n*k : 2\n", "a: [&v x, y]\nb: *v\n", "a: {b: *c}\n",
]


def _typed(value):
    """The value with every type spelled out (1, 1.0 and True are equal in Python, not in a catalog)."""
    if isinstance(value, dict):
        return ("dict", [(_typed(k), _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    return (type(value).__name__, repr(value))


def _outcome(read, text):
    try:
        return "data", _typed(read(text))
    except Exception as exc:
        return "error", type(exc).__name__, str(exc)


@pytest.mark.parametrize("text", YAML_CASES)
def test_the_fast_reader_gives_what_the_full_constructor_gives(text):
    from toolhost_server.catalog import strict_yaml

    class Reference(strict_yaml._CatalogLoader):
        resolve = yaml.resolver.BaseResolver.resolve  # the library's own, without the shortcuts

    assert _outcome(strict_yaml.load_catalog_yaml, text) == _outcome(
        lambda t: yaml.load(t, Loader=Reference), text)


def test_a_schema_jsonschema_cannot_compile_is_refused_at_load(tmp_path):
    # The argument validator is compiled again only on the tool's first call; the load still checks it.
    write_tool(tmp_path, "good")
    write_tool(tmp_path, "pattern", HEAD + "implementation: echo\nparameters: [{name: a, pattern: '(unclosed'}]\n")
    names, problems = load(tmp_path)
    assert names == ["good"] and list(problems) == ["pattern.yaml"], problems


def test_a_reload_stats_unchanged_files_and_rereads_changed_ones(tmp_path):
    for i in range(30):
        write_tool(tmp_path, f"t{i:02d}")
    loader = ToolLoader([tmp_path], (), RunnerSettings())
    first = loader.load().tools
    assert first is not None
    edited = write_tool(tmp_path, "t07", HEAD.replace("x", "t07") + "implementation: echo\n")
    os.utime(edited, ns=(1, 1))  # whatever the clock's granularity, the file's key changed
    again = loader.load().tools
    assert again is not None
    assert [n for n in first if first[n] is not again[n]] == ["t07"]
    assert again["t07"].spec.description == "d"


# -- remembering a directory's listing -----------------------------------------------------------------------------


@pytest.fixture
def later(monkeypatch):
    """Let an hour pass for the listing's clock, so that every directory's last change is past the racy window.
    (Moving a directory's mtime back is not enough: its ctime, which the listing also reads, cannot be set.)"""
    monkeypatch.setattr(directory_listing, "_clock_ns", lambda: time.time_ns() + 3600 * 1_000_000_000)


def catalog_names(loader: ToolLoader) -> list[str]:
    result = loader.load()
    assert result.tools is not None and not result.problems, result.problems
    roots = tuple(str(directory) for directory in loader.catalog_dirs)
    return sorted(name for name, tool in result.tools.items() if tool.spec.origin.startswith(roots))


def test_an_unchanged_directory_is_not_scanned_again_and_every_change_is_still_seen(tmp_path, monkeypatch, later):
    for name in ("a", "b"):
        write_tool(tmp_path, name)
    scanned: list[str] = []
    real_scan = directory_listing._scan

    def counting_scan(directory, *args):
        scanned.append(str(directory))
        return real_scan(directory, *args)

    loader = ToolLoader([tmp_path], (), RunnerSettings())
    monkeypatch.setattr(directory_listing, "_scan", counting_scan)
    assert catalog_names(loader) == ["a", "b"] and scanned == [str(tmp_path)]
    write_tool(tmp_path, "a", HEAD.replace("x", "a") + "implementation: echo\n")  # in place: the directory is the same
    os.utime(tmp_path / "a.yaml", ns=(1, 1))  # whatever the clock's granularity, the file's key changed
    result = loader.load()
    assert result.tools is not None and result.tools["a"].spec.description == "d"
    assert scanned == [str(tmp_path)], "an unchanged directory was scanned again"
    write_tool(tmp_path, "c")
    assert catalog_names(loader) == ["a", "b", "c"]
    (tmp_path / "b.yaml").unlink()
    assert catalog_names(loader) == ["a", "c"]
    (tmp_path / "c.yaml").rename(tmp_path / "c.txt")
    assert catalog_names(loader) == ["a"]


class CoarseTimes:
    """A stat result showing the modification and change times of an earlier one."""

    def __init__(self, st: os.stat_result, earlier: os.stat_result) -> None:
        self._st, self.st_mtime_ns, self.st_ctime_ns = st, earlier.st_mtime_ns, earlier.st_ctime_ns

    def __getattr__(self, name: str) -> object:
        return getattr(self._st, name)


def test_a_directory_changed_twice_within_one_clock_tick_is_read_right(tmp_path, monkeypatch):
    write_tool(tmp_path, "a")
    first = os.stat(tmp_path)
    real_stat = os.stat

    def coarse_stat(path, *args, **kwargs):
        # A coarse file-system clock: the second creation lands in the same tick, so the directory shows the
        # times of the first one.
        st = real_stat(path, *args, **kwargs)
        if str(path) != str(tmp_path):
            return st
        return CoarseTimes(st, first)

    monkeypatch.setattr(directory_listing, "_stat_directory", coarse_stat)
    loader = ToolLoader([tmp_path], (), RunnerSettings())
    assert catalog_names(loader) == ["a"]
    write_tool(tmp_path, "b")
    assert catalog_names(loader) == ["a", "b"]


def test_a_change_whose_mtime_was_put_back_is_seen(tmp_path, later):
    # tar -x, rsync -a and cp -a set the times of what they write: an added file or a rewritten one of the same
    # size can come with the directory's and the file's old mtime. Their ctime still moves.
    write_tool(tmp_path, "a", "name: a\ndescription: d\nimplementation: echo\n")
    loader = ToolLoader([tmp_path], (), RunnerSettings())
    assert catalog_names(loader) == ["a"]
    directory, file = os.stat(tmp_path), os.stat(tmp_path / "a.yaml")
    write_tool(tmp_path, "b")
    write_tool(tmp_path, "a", "name: a\ndescription: e\nimplementation: echo\n")
    assert os.stat(tmp_path / "a.yaml").st_size == file.st_size
    os.utime(tmp_path / "a.yaml", ns=(file.st_atime_ns, file.st_mtime_ns))
    os.utime(tmp_path, ns=(directory.st_atime_ns, directory.st_mtime_ns))
    result = loader.load()
    assert result.tools is not None and sorted(n for n in result.tools if n in ("a", "b")) == ["a", "b"]
    assert result.tools["a"].spec.description == "e"


def test_a_directory_holding_symlinks_is_scanned_every_time(tmp_path, later):
    catalog = tmp_path / "catalog"
    write_tool(catalog, "plain")
    # The targets in a hidden subdirectory (not scanned itself), as a ConfigMap keeps them: links that leave
    # the catalog directory are refused (tests/security/test_security_catalog_files.py).
    elsewhere = catalog / ".elsewhere"
    target = write_tool(elsewhere, "linked")
    (catalog / "linked.yaml").symlink_to(target)
    (catalog / "later.yaml").symlink_to(elsewhere / "later.yaml")  # points at nothing yet
    loader = ToolLoader([catalog], (), RunnerSettings())
    assert catalog_names(loader) == ["linked", "plain"]
    target.unlink()  # neither change touches the catalog directory itself
    write_tool(elsewhere, "later")
    assert catalog_names(loader) == ["later", "plain"]


def test_a_catalog_directory_replaced_by_another_with_the_same_mtime_is_read_anew(tmp_path, later):
    live = tmp_path / "catalog"
    write_tool(live, "old")
    loader = ToolLoader([live], (), RunnerSettings())
    assert catalog_names(loader) == ["old"]
    replacement = tmp_path / "catalog.new"
    write_tool(replacement, "new")
    st = os.stat(live)
    os.utime(replacement, ns=(st.st_atime_ns, st.st_mtime_ns))
    live.rename(tmp_path / "catalog.old")
    replacement.rename(live)
    assert catalog_names(loader) == ["new"]


def test_a_replaced_generation_is_freed_by_reference_counting_alone(tmp_path):
    """serve() moves the first generation out of the cycle collector's reach (gc.freeze), so that full
    collections do not walk every tool of a large catalog. That is only safe while a replaced generation needs
    no cycle collection to be freed: the loader, the registry and the API's prepared messages make no cycles."""
    def write_all(version: int) -> None:
        for i in range(20):
            write_tool(tmp_path, f"p{i}", tool_text(f"p{i}", f"Version {version} of"))
            write_tool(tmp_path, f"s{i}", f"name: s{i}\ndescription: Version {version}.\n"
                       "runner: {type: process, argv: [echo, '{text}']}\n"
                       "parameters: [{name: text, type: string, maximum: 3}]\n"
                       "examples: [{description: e, parameters: {text: hi}}]\n")

    write_all(1)
    loader = ToolLoader([tmp_path], (), RunnerSettings())
    registry = Registry()
    messages = ToolMessages()
    registry.add_listener(messages.prepare)
    gc.collect()
    gc.disable()
    try:
        for version in (1, 2, 3):
            write_all(version)
            result = loader.load()
            assert result.tools is not None and not result.problems, result.problems
            prepared = registry.prepare(result.tools)
            assert prepared is not None
            registry.commit(prepared)
            snapshot = registry.snapshot
            messages.page((tool.spec for tool in snapshot.tools().values()), full=True)
            for i in range(20):  # the compiled validators are kept from a tool's first call
                snapshot.get(f"p{i}").validator.prepare(f"p{i}", {"name": "n"})
                snapshot.get(f"s{i}").validator.prepare(f"s{i}", {"text": "hi"})
            del result, prepared, snapshot
        assert gc.collect() == 0, "replacing the catalog left objects only the cycle collector frees"
    finally:
        gc.enable()
