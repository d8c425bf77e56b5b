"""The "JSON output" section of docs/json.md is the contract scripts rely on: every key it shows for
``kernels``, ``gaps``, ``steps``, ``snapshot`` and ``diff`` is in the real output, every key of
the real output is shown, and the values it spells out (``schema_version``,
``"cpu"|"launch latency"|"gpu wait"``) are the real ones. The shapes are parsed from the
page's own notation."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import ROOT, load_generator
from typer.testing import CliRunner

from traceview.cli import app

DEMO = ROOT / "fixtures" / "demo.json.gz"
# A block's heading names the command and ends with ":" (it may run over lines, not paragraphs).
_BLOCK = re.compile(r"^`traceview (\w+)[^`]*`(?:(?!\n\n).)*?:\n```\n(.*?)^```", re.M | re.S)
_TOKEN = re.compile(r'\s*(?:(\()|("[^"]*")|(\.\.\.[^\]}]*)|([{}\[\],:|])|([\w.+-]+))')
_VERSION_EXAMPLE = re.compile(r"\d+\.\d+\.\d+")
NUMBER = object()  # ``n`` in the notation: any number


@dataclass
class Obj:
    """An object: its keys (``None``: any value), or opaque (``{...}``: shown elsewhere)."""

    keys: dict[str, Any] = field(default_factory=dict)
    alternatives: set[str] = field(default_factory=set)  # "a"|"b": one or more of these keys
    opaque: str | None = None  # the text after "...", e.g. "as above", "same"


@dataclass
class Lst:
    item: Any  # None: items not shown ([...])
    opaque: str | None = None


@dataclass
class Values:
    allowed: list[Any]  # literals the value must be one of


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text.rstrip()):
        m = _TOKEN.match(text, pos)
        assert m is not None, text[pos : pos + 40]
        if m.group(1):  # a comment in parentheses: skipped
            pos = text.index(")", m.end()) + 1
            continue
        out.append(next(g for g in m.groups()[1:] if g is not None).strip())
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0

    def peek(self) -> str:
        return self.tokens[self.pos]

    def take(self, want: str | None = None) -> str:
        token = self.tokens[self.pos]
        assert want is None or token == want, (want, token, self.tokens[self.pos - 5 : self.pos])
        self.pos += 1
        return token

    def value(self) -> Any:
        token = self.peek()
        if token == "{":
            return self.obj()
        if token == "[":
            return self.lst()
        allowed = [self.literal(self.take())]
        while self.peek() == "|":
            self.take("|")
            allowed.append(self.literal(self.take()))
        return Values(allowed)

    @staticmethod
    def literal(token: str) -> Any:
        if token == "n":
            return NUMBER
        return token.strip('"') if token.startswith('"') else json.loads(token)

    def obj(self) -> Obj:
        self.take("{")
        obj = Obj()
        while self.peek() != "}":
            token = self.take()
            if token.startswith("..."):
                obj.opaque = token[3:].strip()
            elif not token.startswith('"'):  # unquoted keys: the trace's own (the header)
                obj.opaque = "the trace's"
                if self.peek() == ":":
                    self.take(":")
                    self.value()
            else:
                names = [token.strip('"')]
                while self.peek() == "|":
                    self.take("|")
                    names.append(self.take().strip('"'))
                shape = None
                if self.peek() == ":":
                    self.take(":")
                    shape = self.value()
                for name in names:
                    obj.keys[name] = shape
                if len(names) > 1:
                    obj.alternatives.update(names)
            if self.peek() == ",":
                self.take(",")
        self.take("}")
        return obj

    def lst(self) -> Lst:
        self.take("[")
        if self.peek().startswith("..."):
            shape = Lst(None, self.take()[3:].strip())
        else:  # one item's shape, then ", ..." or more literals (the values items take)
            shape = Lst(self.value())
            while self.peek() == ",":
                self.take(",")
                if self.peek().startswith("..."):
                    self.take()
                else:
                    shape.item.allowed.append(self.value().allowed[0])
        self.take("]")
        return shape


def documented() -> dict[str, Obj]:
    """Each command's documented shape, ``{...as above}`` and ``{...same}`` resolved."""
    page = (ROOT / "docs" / "json.md").read_text(encoding="utf-8")
    section = page.split("## JSON output", 1)[1].split("\n## ", 1)[0]
    shapes = {name: _Parser(text).obj() for name, text in _BLOCK.findall(section)}
    trace = shapes["kernels"].keys["trace"]
    for shape in shapes.values():
        _resolve(shape, trace)
    return shapes


def _resolve(shape: Obj, trace: Obj) -> None:
    previous: Any = None
    for key, value in shape.keys.items():
        if isinstance(value, Obj) and value.opaque in ("as above", "", "same"):
            shape.keys[key] = trace if key == "trace" else previous
        elif isinstance(value, Lst) and value.opaque == "same shape":
            shape.keys[key] = previous
        elif isinstance(value, Obj):
            _resolve(value, trace)
        elif isinstance(value, Lst) and isinstance(value.item, Obj):
            _resolve(value.item, trace)
        previous = shape.keys[key]


def compare(doc: Any, real: Any, where: str, seen: set[str]) -> list[str]:
    """What differs between a documented shape and a real value (empty: they agree)."""
    seen.add(where)
    if real is None or doc is None:
        return []
    if isinstance(doc, Values):
        if doc.allowed == [NUMBER]:
            ok = isinstance(real, (int, float)) and not isinstance(real, bool)
            return [] if ok else [f"{where}: {real!r} is not a number"]
        if isinstance(doc.allowed[0], str) and _VERSION_EXAMPLE.fullmatch(doc.allowed[0]):
            return []  # an example version
        return [] if real in doc.allowed else [f"{where}: {real!r} not in {doc.allowed}"]
    if isinstance(doc, Lst):
        if not isinstance(real, list):
            return [f"{where}: a list in the docs, {type(real).__name__} in the output"]
        return [p for item in real for p in compare(doc.item, item, f"{where}[]", seen)]
    assert isinstance(doc, Obj)
    if not isinstance(real, dict):
        return [f"{where}: an object in the docs, {type(real).__name__} in the output"]
    if doc.opaque is not None:
        return []
    problems = []
    fixed = set(doc.keys) - doc.alternatives
    for key in sorted(fixed - set(real)):
        problems.append(f"{where}.{key}: in the docs, not in the output")
    for key in sorted(set(real) - set(doc.keys)):
        problems.append(f"{where}.{key}: in the output, not in the docs")
    if doc.alternatives and not set(real) & doc.alternatives:
        problems.append(f"{where}: none of {sorted(doc.alternatives)}")
    for key in set(real) & set(doc.keys):
        problems += compare(doc.keys[key], real[key], f"{where}.{key}", seen)
    return problems


def _paths(doc: Any, where: str) -> set[str]:
    """Every documented place with a shape to check."""
    out = {where}
    if isinstance(doc, Obj) and doc.opaque is None:
        for key, value in doc.keys.items():
            out |= _paths(value, f"{where}.{key}")
    elif isinstance(doc, Lst) and doc.item is not None:
        out |= _paths(doc.item, f"{where}[]")
    return out


def _json(*args: str) -> Any:
    r = CliRunner().invoke(app, [*args, "--no-cache"])
    assert r.exit_code in (0, 1), r.output  # 1: diff's gate failed, which the test wants
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    """Real outputs that between them show every documented key: the demo trace, and a diff
    of its snapshot against another generated run whose gate fails."""
    work = tmp_path_factory.mktemp("shapes")
    other = work / "other.json.gz"
    load_generator().main(["--seed", "2", str(other)])
    baseline = work / "baseline.json"
    r = CliRunner().invoke(app, ["snapshot", str(DEMO), "-o", str(baseline), "-q", "--no-cache"])
    assert r.exit_code == 0, r.output
    demo = str(DEMO)
    return {
        "kernels": [_json("kernels", demo, "-f", "json", "--pstep", "6-7")],
        "gaps": [
            _json("gaps", demo, "-f", "json", "--largest", "0"),
            _json("gaps", demo, "-f", "json", "--per-stream"),
        ],
        "steps": [_json("steps", demo, "-f", "json")],
        "snapshot": [json.loads(baseline.read_text())],
        "diff": [
            _json("diff", str(baseline), str(other), "-f", "json", "--max-regression", "1%"),
            _json("diff", str(other), str(baseline), "-f", "json", "--max-idle-regression", "1%"),
            _json("diff", demo, str(other), "-f", "json", "--explain", "--max-regression", "1%"),
        ],
    }


def test_every_command_is_documented(outputs: dict[str, list[Any]]) -> None:
    assert set(documented()) == set(outputs)


@pytest.mark.parametrize("command", ["kernels", "gaps", "steps", "snapshot", "diff"])
def test_the_output_has_the_documented_shape(outputs: dict[str, list[Any]], command: str) -> None:
    doc = documented()[command]
    seen: set[str] = set()
    problems = [p for real in outputs[command] for p in compare(doc, real, command, seen)]
    assert problems == []
    # Every documented key was really in an output (an empty list's items prove nothing).
    assert _paths(doc, command) - seen == set()


def test_the_notation_is_read_as_meant() -> None:
    """The parser on the notation's forms: keys with and without values, alternatives,
    comments, references and opaque parts."""
    shape = _Parser(
        '{"a": 2, "b" (a comment), "c": "x"|"y", "d": [{"e"}], "f": [...], "g": {...same},'
        ' "h"|"i": {"j"}, "k": {K1, K2}}'
    ).obj()
    assert list(shape.keys) == ["a", "b", "c", "d", "f", "g", "h", "i", "k"]
    assert shape.keys["a"] == Values([2]) and shape.keys["b"] is None
    assert shape.keys["c"] == Values(["x", "y"])
    assert shape.keys["d"] == Lst(Obj({"e": None}))
    assert shape.keys["f"] == Lst(None, "")
    assert shape.alternatives == {"h", "i"}
    assert shape.keys["k"].opaque == "the trace's"
    _resolve(shape, Obj())
    assert shape.keys["g"] == Lst(None, "")  # {...same}: the key before's shape
    real = {"a": 2, "b": 0, "c": "z", "d": [{"e": 1, "x": 0}]}
    assert sorted(compare(shape, real, "t", set())) == [
        "t.c: 'z' not in ['x', 'y']",
        "t.d[].x: in the output, not in the docs",
        "t.f: in the docs, not in the output",
        "t.g: in the docs, not in the output",
        "t.k: in the docs, not in the output",
        "t: none of ['h', 'i']",
    ]
