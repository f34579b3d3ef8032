"""The input boundary: every text, number and YAML document that enters cr2 from outside is checked here.

HTTP bodies (cr2_cli/serve), command-line arguments (cr2_cli/main.py), routed queries (cr2.deploy.deployment) and
configuration / dataset-definition files all pass through these functions, so one rule decides what is accepted:

- text is well-formed Unicode that encodes to UTF-8: no lone surrogates (JSON "\\ud83d", or the surrogate
  escapes Python gives non-UTF-8 command-line bytes), refused with the field's name;
- a number is range-checked *before* it is turned into a float: a 401-digit integer is "out of range", never an
  OverflowError; NaN and infinities are refused;
- a file is read bounded (`read_bounded`): a regular file only (a FIFO, a device or a socket is refused before it
  is read, so nothing blocks or streams forever), at most a byte budget, a loop of symbolic links named as such;
- a table file (labels, benchmarks, measured outputs; Parquet or CSV) is read by one reader (`read_table_file`)
  that refuses, before anything is decoded, more than MAX_TABLE_ROWS rows or MAX_TABLE_UNCOMPRESSED_BYTES (from
  the Parquet footer, then from the decoded size of dictionary-encoded text), and a column named twice;
- a value echoed in a message is cut (`shown`), so a 50 MB cell never becomes a 50 MB error;
- a YAML document is read bounded (bytes, then the size of what its aliases expand to), so a 531-byte alias
  bomb or /dev/zero is refused in milliseconds instead of exhausting memory; its syntax errors name file and line;
- a configuration or states model (`InputModel`) holds finite numbers only, and every lower bound it names
  (`min` / `low_x` / `x_min`) lies at or below its upper bound (`max` / `high_x` / `x_max`);
- text bound for a terminal loses its control characters (C0, C1 and the ESC sequences they start, and the
  Unicode bidirectional controls) except newline and tab (`printable`).

Refusals are `InvalidValueError`s (a ValueError and a Cr2Error: exit code 2 on the CLI, a 4xx on the server); a
table file's are `DataValidationError`s (exit code 2), naming the file, what was found and the limit.
"""
from __future__ import annotations

import errno
import functools
import math
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from pydantic import BaseModel, ConfigDict, model_validator

from cr2.core.errors import DataValidationError, InvalidValueError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

MAX_YAML_BYTES = 1 << 20  # a configuration or dataset-definition file; the shipped ones are a few kB
MAX_YAML_NODES = 100_000  # scalars + collections after every alias is expanded (the default config has ~1,000)
MAX_YAML_DEPTH = 64
MAX_MAGNITUDE = 1e300  # integers beyond this would overflow (or nearly) as floats: refused before conversion


def check_text(value: str, name: str) -> str:
    """`value` if it is well-formed Unicode (no lone surrogates, so it encodes to UTF-8), else InvalidValueError."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = value[exc.start:exc.end]
        raise InvalidValueError(f"{name} is not valid UTF-8 text: it holds {ascii(bad)} at character {exc.start} "
                                "(a lone surrogate, or bytes that are not UTF-8); send UTF-8 text") from None
    return value


def check_texts(value: Any, name: str = "body", max_items: int = 1_000_000) -> Any:
    """`value` (parsed JSON: dicts, lists, scalars) if every string in it, keys included, is well-formed; the
    refusal names the path of the first bad string (e.g. `messages[0].content`). Iterative: no recursion."""
    stack: list[tuple[Any, str]] = [(value, name)]
    seen = 0
    while stack:
        item, path = stack.pop()
        seen += 1
        if seen > max_items:
            raise InvalidValueError(f"{name} holds more than {max_items:,} values")
        if isinstance(item, str):
            check_text(item, path)
        elif isinstance(item, dict):
            for k, v in item.items():
                if isinstance(k, str):
                    check_text(k, f"a key of {path}")
                stack.append((v, f"{path}.{k}" if isinstance(k, str) and k.isidentifier() else f"{path}[{k!r}]"))
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
    return value


def parse_number(value: Any, name: str, low: float | None = None, high: float | None = None, *,
                 low_inclusive: bool = False, high_inclusive: bool = False) -> float:
    """`value` (a number, or a string from a header or argument) as a finite float in the given range, or an
    InvalidValueError naming `name`. Integers are compared exactly before conversion, so a huge one is out of
    range rather than an OverflowError; booleans are not numbers."""
    if isinstance(value, bool):
        raise InvalidValueError(f"{name} must be a number, not {str(value).lower()}")
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 64:
            raise InvalidValueError(f"{name} must be a number of at most 64 characters, got {len(text):,}")
        try:
            value = int(text) if re.fullmatch(r"[+-]?\d+", text) else float(text)
        except ValueError:
            raise InvalidValueError(f"{name} must be a number, got {printable(ascii(text))}") from None
    if not isinstance(value, (int, float)):
        raise InvalidValueError(f"{name} must be a number, got {type(value).__name__}")
    if isinstance(value, int):
        too_low = low is not None and (value < low or (value == low and not low_inclusive))
        too_high = high is not None and (value > high or (value == high and not high_inclusive))
        if abs(value) > MAX_MAGNITUDE:
            raise InvalidValueError(f"{name} is out of range: {_short(value)}; a number here is at most "
                                    f"{MAX_MAGNITUDE:g} in magnitude")
        if too_low or too_high:
            raise InvalidValueError(f"{name} must be {_range(low, high, low_inclusive, high_inclusive)}, got "
                                    f"{_short(value)}")
        return float(value)
    if not math.isfinite(value):
        raise InvalidValueError(f"{name} must be finite, got {value}")
    if (low is not None and (value < low or (value == low and not low_inclusive))) or \
            (high is not None and (value > high or (value == high and not high_inclusive))):
        raise InvalidValueError(f"{name} must be {_range(low, high, low_inclusive, high_inclusive)}, got {value:g}")
    return float(value)


MAX_SHOWN_CHARS = 80  # a value echoed in an error message: enough to recognise it, never a 50 MB cell


def shown(value: Any, limit: int = MAX_SHOWN_CHARS, *, quoted: bool = True) -> str:
    """`value` as it may be echoed in a message: its repr (quoted=False: its text, for an id that reads as itself),
    terminal-safe (`printable`), cut to `limit` characters and followed by "… (N chars)" when longer (N: the length
    of a string, else of the repr). A string is sliced before its repr is taken, so echoing a 50 MB cell costs no
    more than echoing a short one."""
    if isinstance(value, str):
        text, full = (repr(value[:limit + 1]) if quoted else value[:limit + 1]), len(value)
        cut = full > limit or len(text) > limit
    else:
        text = repr(value) if quoted else str(value)
        full, cut = len(text), len(text) > limit
    return f"{printable(text[:limit])}… ({full:,} chars)" if cut else printable(text)


def _range(low: float | None, high: float | None, low_inclusive: bool, high_inclusive: bool) -> str:
    if high is None:
        return f"{'≥' if low_inclusive else '>'} {low:g}" if low is not None else "a finite number"
    if low is None:
        return f"{'≤' if high_inclusive else '<'} {high:g}"
    return f"in {'[' if low_inclusive else '('}{low:g}, {high:g}{']' if high_inclusive else ')'}"


def _short(value: int) -> str:
    text = str(value)
    return text if len(text) <= 20 else f"an integer of {len(text.lstrip('-')):,} digits"


# ------------------------------------------------------------------------------------------- files
# A table file (labels a user imports, a benchmark, measured outputs) is bounded by what it holds, not only by its
# bytes: Parquet compresses 10⁷ rows or a 300 MB cell into kilobytes. The largest file the project ships, MMLU-Pro's
# measured outputs (12,032 questions × 29 models), has 347,215 rows and 8 MB uncompressed (15 MB as Arrow); a label
# import of 20k queries × 100 models is 2M rows. Materialised, a table at both limits takes about 1 GB in pandas.
MAX_TABLE_ROWS = 2_000_000
MAX_TABLE_UNCOMPRESSED_BYTES = 256 << 20  # the footer's uncompressed page sizes, and the decoded columns
MAX_TABLE_BYTES = MAX_TABLE_UNCOMPRESSED_BYTES  # a file is never larger than what it holds (a CSV is its own text)


def resolve_path(path: str | Path, what: str = "path") -> Path:
    """`path` made absolute with every symbolic link followed, or an InvalidValueError when the links form a loop
    (Path.resolve raises RuntimeError or OSError ELOOP there)."""
    p = Path(path).expanduser()
    try:
        return p.resolve()
    except RuntimeError:
        raise InvalidValueError(f"{what} {p}: its symbolic links form a loop; point it at a real folder or file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidValueError(f"{what} {p}: its symbolic links form a loop; point it at a real folder or "
                                    "file") from None
        raise


def read_bounded(path: str | Path, limit: int, what: str = "file") -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them: the one reader of every file cr2 is given.

    A FIFO, device or socket is refused before anything is read (opened non-blocking, then fstat), so a named pipe
    never hangs and /dev/zero never streams; a file over `limit` bytes, a folder, a missing file, a loop of symbolic
    links and an unreadable file are InvalidValueErrors naming the path."""
    p = Path(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(p, flags)
    except FileNotFoundError:
        raise InvalidValueError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InvalidValueError(f"{path}: is a folder, not a {what}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidValueError(f"{path}: its symbolic links form a loop") from None
        raise InvalidValueError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InvalidValueError(f"{path}: is a folder, not a {what}")
        if not stat.S_ISREG(info.st_mode):
            kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(info.st_mode) else "a device" if
                    stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "a socket" if
                    stat.S_ISSOCK(info.st_mode) else "not a regular file")
            raise InvalidValueError(f"{path}: is {kind}, not a regular {what}; give the path of a file")
        if info.st_size > limit:
            raise InvalidValueError(f"{path}: larger than {limit:,} bytes ({info.st_size:,}); is this the right "
                                    f"{what}?")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= limit:  # st_size can understate (a file still growing, /proc): the read itself is bounded too
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise InvalidValueError(f"{path}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if size > limit:
        raise InvalidValueError(f"{path}: larger than {limit:,} bytes; is this the right {what}?")
    return b"".join(chunks)


# ------------------------------------------------------------------------------------------- tables
TABLE_SUFFIXES = (".parquet", ".pq", ".csv")


def read_table_file(path: str | Path, columns: Sequence[str] | None = None, what: str = "table file") -> "pd.DataFrame":
    """A Parquet (.parquet/.pq) or CSV (.csv) file as a DataFrame, read bounded: the one reader of every table file
    cr2 is given or ships (`read_bounded`, then `parse_table`); DataValidationError naming the file."""
    return parse_table(read_table_bytes(path, what), path, columns)


def read_table_bytes(path: str | Path, what: str = "table file") -> bytes:
    """The bytes of a table file (`read_bounded`: a regular file of at most MAX_TABLE_BYTES, never a FIFO or a
    device), for a caller that also digests them; DataValidationError naming the file."""
    p = Path(path)
    if p.suffix.lower() not in TABLE_SUFFIXES:
        raise DataValidationError(f"{p}: unsupported file type {shown(p.suffix.lower())}; use .parquet or .csv")
    try:
        return read_bounded(p, MAX_TABLE_BYTES, what)
    except InvalidValueError as exc:
        raise DataValidationError(str(exc)) from None


def parse_table(raw: bytes, path: str | Path, columns: Sequence[str] | None = None) -> "pd.DataFrame":
    """The bytes of the Parquet or CSV file `path` (its suffix decides) as a DataFrame of `columns` (None: all),
    within MAX_TABLE_ROWS rows and MAX_TABLE_UNCOMPRESSED_BYTES, checked before the table is materialised;
    DataValidationError for an unreadable file, one over a limit, a missing column, or two columns of one name
    (which of them would count is a guess)."""
    p = Path(path)
    if p.suffix.lower() == ".csv":
        return _csv_frame(raw, p, columns)
    return parquet_table(raw, p, columns).to_pandas()


def _unreadable(path: Path, exc: Exception) -> DataValidationError:
    first = (str(exc).splitlines() or [""])[0]
    kind = "csv" if path.suffix.lower() == ".csv" else "Parquet"
    return DataValidationError(f"{path}: not a readable {kind} file ({type(exc).__name__}: {printable(first[:200])})")


def _refuse_repeated_names(names: Sequence[Any], path: Path) -> None:
    from collections import Counter

    twice = sorted(str(n) for n, k in Counter(names).items() if k > 1 and n is not None and n != "")
    if twice:
        listed = ", ".join(shown(n, 40) for n in twice[:5])
        raise DataValidationError(f"{path}: the column name{'s' if len(twice) > 1 else ''} {listed} appear"
                                  f"{'' if len(twice) > 1 else 's'} more than once; keep one column of each name")


def _refuse_over(path: Path, found: int, limit: int, unit: str, name: str) -> None:
    if found > limit:
        raise DataValidationError(f"{path}: {found:,} {unit}, more than the {limit:,} a table file may hold ({name}); "
                                  "split it or import a subset")


def parquet_table(raw: bytes, path: str | Path, columns: Sequence[str] | None = None) -> "pa.Table":
    """The Parquet bytes of `path` as an Arrow table of `columns` (None: all), bounded before decoding.

    The footer is read first: its row count and the uncompressed size of the chosen columns' pages are checked
    against MAX_TABLE_ROWS and MAX_TABLE_UNCOMPRESSED_BYTES. A dictionary page holding one large value that every row
    points at is small in the footer and huge decoded, so the text columns are read as dictionaries (their size as
    stored) and their decoded size — the value lengths the indices select — is checked before they are expanded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = Path(path)
    try:
        footer = pq.ParquetFile(pa.BufferReader(raw))
        meta, declared = footer.metadata, footer.schema_arrow  # declared: the types the file says (dictionary or not)
        names = declared.names
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, … for a file that is not Parquet
        raise _unreadable(p, exc) from None
    _refuse_over(p, meta.num_rows, MAX_TABLE_ROWS, "rows", "MAX_TABLE_ROWS")
    _refuse_repeated_names(names, p)
    if columns is not None:
        absent = [c for c in columns if c not in names]
        if absent:
            has = ", ".join(shown(n, 40) for n in names[:12]) + (" …" if len(names) > 12 else "")
            raise DataValidationError(f"{p}: no column{'s' if len(absent) > 1 else ''} "
                                      f"{', '.join(shown(c, 40) for c in absent)}; the file has {has}")
    chosen = set(names if columns is None else columns)
    text_paths, stored = [], 0
    for j in range(meta.num_columns):
        leaf = meta.schema.column(j)
        if leaf.path.split(".")[0] not in chosen:
            continue
        if leaf.physical_type == "BYTE_ARRAY":
            text_paths.append(leaf.path)
        stored += sum(meta.row_group(i).column(j).total_uncompressed_size for i in range(meta.num_row_groups))
    _refuse_over(p, stored, MAX_TABLE_UNCOMPRESSED_BYTES, "bytes uncompressed", "MAX_TABLE_UNCOMPRESSED_BYTES")
    try:
        table = pq.read_table(pa.BufferReader(raw), columns=None if columns is None else list(columns),
                              read_dictionary=text_paths)
    except Exception as exc:
        raise _unreadable(p, exc) from None
    _refuse_over(p, table.num_rows, MAX_TABLE_ROWS, "rows", "MAX_TABLE_ROWS")
    _refuse_over(p, sum(_decoded_bytes(c) for c in table.columns), MAX_TABLE_UNCOMPRESSED_BYTES,
                 "bytes uncompressed (decoded)", "MAX_TABLE_UNCOMPRESSED_BYTES")
    try:
        return pa.table([c.cast(declared.field(n).type) if c.type != declared.field(n).type else c
                         for n, c in zip(table.column_names, table.columns)], schema=pa.schema(
            [declared.field(n) for n in table.column_names], metadata=declared.metadata))
    except Exception as exc:
        raise _unreadable(p, exc) from None


def _decoded_bytes(column: Any) -> int:
    """Bytes the Arrow array (or chunked array) `column` takes with every dictionary in it expanded. Iterative over
    nested types (lists, structs): no recursion."""
    import pyarrow as pa
    import pyarrow.compute as pc

    total = 0
    stack = list(column.chunks) if isinstance(column, pa.ChunkedArray) else [column]
    while stack:
        arr = stack.pop()
        kind = arr.type
        if pa.types.is_dictionary(kind):
            values = arr.dictionary
            if len(arr) and len(values) and (pa.types.is_string(values.type) or pa.types.is_binary(values.type)
                                             or pa.types.is_large_string(values.type)
                                             or pa.types.is_large_binary(values.type)):
                lengths = pc.binary_length(values)
                total += int(pc.sum(pc.take(lengths, arr.indices)).as_py() or 0)  # a null index takes nothing
            else:
                total += values.nbytes
            total += 8 * len(arr)  # offsets and validity, as the expanded array holds them
        elif pa.types.is_struct(kind):
            total += len(arr) // 8 + 1
            stack.extend(arr.field(i) for i in range(kind.num_fields))
        elif isinstance(arr, (pa.ListArray, pa.LargeListArray, pa.FixedSizeListArray, pa.MapArray)):
            total += 8 * (len(arr) + 1)
            stack.append(arr.values)
        else:
            total += arr.nbytes
    return total


def _csv_frame(raw: bytes, path: Path, columns: Sequence[str] | None) -> "pd.DataFrame":
    """A CSV file's bytes as a DataFrame: bounded by MAX_TABLE_UNCOMPRESSED_BYTES (a CSV is its own uncompressed
    text) and MAX_TABLE_ROWS; its header is the line pandas takes for one (the first that is not blank), so a
    column named twice there is refused whatever precedes it."""
    import io

    import pandas as pd

    _refuse_over(path, len(raw), MAX_TABLE_UNCOMPRESSED_BYTES, "bytes", "MAX_TABLE_UNCOMPRESSED_BYTES")
    try:
        header = pd.read_csv(io.BytesIO(raw), header=None, nrows=1, dtype=str, keep_default_na=False)
        _refuse_repeated_names(header.iloc[0].tolist() if len(header) else [], path)
        # every row but the last ends in a line break (\n, \r\n or a lone \r; a quoted cell may hold more), and the
        # header takes a line: rows ≤ breaks, so only a file with more breaks than the limit is parsed row-capped
        lines = raw.count(b"\n") + raw.count(b"\r")
        frame = pd.read_csv(io.BytesIO(raw), nrows=None if lines <= MAX_TABLE_ROWS else MAX_TABLE_ROWS + 1)
    except DataValidationError:
        raise
    except Exception as exc:  # pandas parser errors (EmptyDataError, ParserError, UnicodeDecodeError, …)
        raise _unreadable(path, exc) from None
    if len(frame) > MAX_TABLE_ROWS:  # parsing stopped one row past the limit: the rest is never parsed
        raise DataValidationError(f"{path}: more than {MAX_TABLE_ROWS:,} rows ({lines:,} line breaks), more than a "
                                  "table file may hold (MAX_TABLE_ROWS); split it or import a subset")
    if columns is not None:
        absent = [c for c in columns if c not in frame.columns]
        if absent:
            raise DataValidationError(f"{path}: no column {', '.join(shown(c, 40) for c in absent)}")
        frame = frame[list(columns)]
    return frame


# ------------------------------------------------------------------------------------------- YAML
def read_yaml_bytes(path: str | Path, limit: int = MAX_YAML_BYTES) -> str:
    """The text of a YAML file read bounded (`read_bounded`: a regular file of at most `limit` bytes), UTF-8."""
    raw = read_bounded(path, limit, "YAML file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidValueError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def _expanded_size(value: Any, max_nodes: int, max_depth: int, where: str) -> None:
    """Refuse `value` when expanding its shared (aliased) parts would exceed `max_nodes` values or nest deeper
    than `max_depth`, or when it contains itself. Linear in the *distinct* objects: sizes are memoised by id."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, int, bool]] = [(value, 1, False)]
    on_path: set[int] = set()
    while stack:
        item, depth, done = stack.pop()
        if not isinstance(item, (dict, list)):
            continue
        key = id(item)
        children = list(item.values()) + list(item.keys()) if isinstance(item, dict) else item
        if done:
            on_path.discard(key)
            total = 1 + sum(sizes.get(id(c), 1) if isinstance(c, (dict, list)) else 1 for c in children)
            sizes[key] = total
            if total > max_nodes:
                raise InvalidValueError(f"{where}: expands to more than {max_nodes:,} values (YAML aliases "
                                        "repeating large parts); write the values out or use fewer aliases")
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise InvalidValueError(f"{where}: a YAML alias refers to a collection that contains it")
        if depth > max_depth:
            raise InvalidValueError(f"{where}: nested deeper than {max_depth} levels")
        on_path.add(key)
        stack.append((item, depth, True))
        stack.extend((c, depth + 1, False) for c in children if isinstance(c, (dict, list)))


def _scan_yaml_events(text: str, where: str, max_nodes: int, max_depth: int) -> None:
    """Refuse `text` when its event stream nests deeper than `max_depth` or holds more than `max_nodes` values
    (before aliases are expanded), stopping at the first event past either budget. Events are flat: nothing is
    built and nothing recurses, so `[` × 500 or an 800 kB list is refused in milliseconds (libyaml's parser when
    PyYAML has it). Syntax errors are left to the loader, whose messages name the line."""
    import yaml

    starts, ends = (yaml.MappingStartEvent, yaml.SequenceStartEvent), (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    values = starts + (yaml.ScalarEvent, yaml.AliasEvent)
    depth = nodes = 0
    try:
        for event in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if isinstance(event, values):
                nodes += 1
                if nodes > max_nodes:
                    raise InvalidValueError(f"{where}: holds more than {max_nodes:,} values (line "
                                            f"{event.start_mark.line + 1}); is this the right file?")
            if isinstance(event, starts):
                depth += 1
                if depth > max_depth:
                    raise InvalidValueError(f"{where}: nested deeper than {max_depth} levels (line "
                                            f"{event.start_mark.line + 1}); flatten the structure")
            elif isinstance(event, ends):
                depth -= 1
    except yaml.YAMLError:
        return  # the loader reports it, at the same place


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int, first_line: int):
        super().__init__(key, line, first_line)
        self.key, self.line, self.first_line = key, line, first_line


@functools.lru_cache(maxsize=1)
def _strict_loader() -> type:
    """PyYAML's safe loader (libyaml's when available) that refuses a key given twice in one mapping.

    Each mapping's own keys are compared once constructed (so `1` and `0x1` are the same key), before any merge
    (`<<`) is flattened into it: a key that overrides a merged one is the point of a merge, not a duplicate."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    merge_tag = "tag:yaml.org,2002:merge"

    class StrictLoader(base):  # type: ignore[misc, valid-type]
        def __init__(self, stream: Any) -> None:
            super().__init__(stream)
            self._keys_checked: set[int] = set()

        def _check_keys(self, node: Any) -> None:
            if id(node) in self._keys_checked or not isinstance(node, yaml.MappingNode):
                return
            self._keys_checked.add(id(node))
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == merge_tag:
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise _DuplicateKey(key, line, seen[key])
                    seen[key] = line
                except TypeError:  # an unhashable key: construct_mapping refuses it with its own message
                    continue

        def flatten_mapping(self, node: Any) -> None:
            self._check_keys(node)
            for key_node, value_node in node.value:  # the mappings merged in, before they are flattened
                if key_node.tag == merge_tag:
                    for merged in (value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]):
                        self._check_keys(merged)
            super().flatten_mapping(node)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            self._check_keys(node)
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def load_yaml(text: str, where: str, max_nodes: int = MAX_YAML_NODES, max_depth: int = MAX_YAML_DEPTH) -> Any:
    """`text` parsed as safe YAML within a budget: at most `max_nodes` values (checked while parsing, and again once
    aliases are expanded) and `max_depth` levels; every string well-formed; no key twice in one mapping (the
    last would win silently). Raises yaml.YAMLError for syntax (the caller says where)."""
    import yaml

    check_text(text, where)
    _scan_yaml_events(text, where, max_nodes, max_depth)
    try:
        data = yaml.load(text, Loader=_strict_loader())  # noqa: S506 (a SafeLoader subclass)
    except _DuplicateKey as dup:
        raise InvalidValueError(f"{where}: line {dup.line}: the key {shown(dup.key)} is given twice in one mapping "
                                f"(first at line {dup.first_line}); keep one") from None
    _expanded_size(data, max_nodes, max_depth, where)
    return data


def load_yaml_file(path: str | Path, limit: int = MAX_YAML_BYTES) -> Any:
    """A YAML file read and parsed within the byte, node and depth budgets; every problem, a syntax error included,
    is an InvalidValueError naming the file (and the line)."""
    import yaml

    try:
        return load_yaml(read_yaml_bytes(path, limit), str(path))
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["syntax error"])[0]
        raise InvalidValueError(f"{path}: malformed YAML{where}: {problem}; fix the syntax and try again") from None


# ------------------------------------------------------------------------------------------- terminal
# ESC-started sequences (CSI with parameters, OSC up to its BEL/ST, and two-byte escapes), then any other C0 / DEL /
# C1 control character except newline and tab. An OSC without a terminator loses only its introducer: the text after
# it stays visible (a terminal would have swallowed it), and the introducer's removal leaves nothing to swallow.
_ESCAPE_SEQ = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]"
                         r"|\x9d[^\x07\x1b\x9c]*(?:\x07|\x9c|\x1b\\)")
# Unicode bidirectional controls (embeddings and overrides U+202A–U+202E, isolates U+2066–U+2069, the marks U+200E,
# U+200F and U+061C) reorder what follows them: "evil\u202egpj.exe" reads as "evilexe.jpg". Removed with the rest.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` safe for a terminal: ESC / CSI / OSC sequences, every other C0, DEL and C1 control character and the
    Unicode bidirectional controls removed (newline and tab kept), lone surrogates shown as escapes. Nothing printed
    can move the cursor, clear the screen, retitle the window or show its text in another order."""
    if not isinstance(text, str):
        text = str(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub("", _ESCAPE_SEQ.sub("", text))


# ------------------------------------------------------------------------------------------- configuration models
# a lower bound and the upper bound it pairs with, by name: min / max, x_min / x_max, min_x / max_x, low_x / high_x
_BOUND_PAIRS = ((re.compile(r"min"), "max"), (re.compile(r"(.+)_min"), r"\1_max"), (re.compile(r"min_(.+)"), r"max_\1"),
                (re.compile(r"low_(.+)"), r"high_\1"))


class InputModel(BaseModel):
    """The base of every model cr2 validates read input with (configuration sections, states, hardware, dataset
    definitions): unknown keys are errors, every number is finite (NaN and ±infinity are refused in every float field,
    inside lists and mappings too, free-form ones such as router parameters included), and a lower bound never
    exceeds the upper bound it pairs with by name."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="after")
    def _finite_and_ordered(self) -> "InputModel":
        fields = type(self).model_fields
        for name in fields:  # float fields refuse NaN / inf themselves; free-form values (dict[str, Any]) here
            stack = [(getattr(self, name), name)]
            while stack:
                value, where = stack.pop()
                if isinstance(value, float) and not math.isfinite(value):
                    raise InvalidValueError(f"{where} must be a finite number, got {value}")
                if isinstance(value, dict):
                    stack.extend((v, f"{where}.{k}") for k, v in value.items())
                elif isinstance(value, (list, tuple)):
                    stack.extend((v, f"{where}[{i}]") for i, v in enumerate(value))
        for name in fields:
            for pattern, upper in _BOUND_PAIRS:
                m = pattern.fullmatch(name)
                other = m.expand(upper) if m else None
                if other is None or other not in fields:
                    continue
                low, high = getattr(self, name), getattr(self, other)
                if isinstance(low, (int, float)) and isinstance(high, (int, float)) and not isinstance(low, bool) \
                        and low > high:
                    raise InvalidValueError(f"{name} ({low:g}) must not exceed {other} ({high:g})")
        return self
