"""The mapping that holds an array's memory, as /proc/self/smaps says (Linux only)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Mapping:
    shared: bool  # VmFlags has "sh": a shared mapping, whose pages outlive this process's map
    rss_kib: int  # its pages this process maps now


def mapping_of(array: np.ndarray) -> Mapping:
    """The mapping that holds ``array``'s first byte."""
    address = array.__array_interface__["data"][0]
    found: tuple[int, int] | None = None
    rss = 0
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(maxsplit=1)[0]
        if "-" in head and not head.endswith(":"):  # a mapping's first line: start-end ...
            start, end = (int(x, 16) for x in head.split("-"))
            found = (start, end) if start <= address < end else None
        elif found is not None and head == "Rss:":
            rss = int(line.split()[1])
        elif found is not None and head == "VmFlags:":
            return Mapping("sh" in line.split()[1:], rss)
    raise LookupError(f"no mapping holds {address:#x}")
