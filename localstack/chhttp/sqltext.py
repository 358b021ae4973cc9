"""A small ClickHouse SQL lexer and the few text-level analyses the HTTP front end needs.

The server never rewrites a query from a parse tree. It lexes just enough to answer
questions that the real ClickHouse server answers before execution (is this more than one
statement? where does INSERT data start? which output format was asked for?) and to splice
a handful of identifiers in place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WORD, QUOTED_IDENT, STRING, NUMBER, PUNCT, SEMICOLON, SPACE, COMMENT = (
    "word",
    "quoted_ident",
    "string",
    "number",
    "punct",
    "semicolon",
    "space",
    "comment",
)

_WORD_RE = re.compile(r"[A-Za-z_\x80-\uffff][A-Za-z0-9_$\x80-\uffff]*")
_NUMBER_RE = re.compile(r"(?:0[xX][0-9a-fA-F]+|\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")
_SPACE_RE = re.compile(r"\s+")


class UnterminatedError(ValueError):
    """A string, quoted identifier or block comment runs to the end of the text."""

    def __init__(self, what: str, position: int) -> None:
        super().__init__(f"unterminated {what} starting at position {position}")
        self.what = what
        self.position = position


@dataclass(frozen=True)
class Token:
    kind: str
    start: int
    end: int
    text: str

    def is_word(self, *words: str) -> bool:
        return self.kind == WORD and self.text.upper() in words


def _quoted_end(sql: str, start: int, quote: str) -> int:
    """Index just past a quoted run opened at `start`; handles backslash and doubled quotes."""
    i = start + 1
    n = len(sql)
    while i < n:
        ch = sql[i]
        if ch == "\\":
            i += 2
            continue
        if ch == quote:
            if i + 1 < n and sql[i + 1] == quote:
                i += 2
                continue
            return i + 1
        i += 1
    raise UnterminatedError("string" if quote == "'" else "identifier", start)


def lex(sql: str, stop=None):
    """Yield tokens of `sql`. `stop(token, previous_significant)` may end lexing early."""
    i = 0
    n = len(sql)
    previous = None
    while i < n:
        ch = sql[i]
        if ch.isspace():
            m = _SPACE_RE.match(sql, i)
            tok = Token(SPACE, i, m.end(), m.group())
        elif sql.startswith("--", i) or (ch == "#" and (i + 1 >= n or sql[i + 1] in " !")):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            tok = Token(COMMENT, i, end, sql[i:end])
        elif sql.startswith("/*", i):
            end = _block_comment_end(sql, i)
            tok = Token(COMMENT, i, end, sql[i:end])
        elif ch == "'":
            end = _quoted_end(sql, i, "'")
            tok = Token(STRING, i, end, sql[i:end])
        elif ch in "\"`":
            end = _quoted_end(sql, i, ch)
            tok = Token(QUOTED_IDENT, i, end, sql[i:end])
        elif ch == ";":
            tok = Token(SEMICOLON, i, i + 1, ";")
        elif ch.isdigit() or (ch == "." and i + 1 < n and sql[i + 1].isdigit()):
            m = _NUMBER_RE.match(sql, i)
            tok = Token(NUMBER, i, m.end(), m.group())
        else:
            m = _WORD_RE.match(sql, i)
            if m:
                tok = Token(WORD, i, m.end(), m.group())
            else:
                tok = Token(PUNCT, i, i + 1, ch)
        yield tok
        if tok.kind not in (SPACE, COMMENT):
            if stop is not None and stop(tok, previous):
                return
            previous = tok
        i = tok.end


def _block_comment_end(sql: str, start: int) -> int:
    """ClickHouse block comments nest."""
    depth = 0
    i = start
    n = len(sql)
    while i < n:
        if sql.startswith("/*", i):
            depth += 1
            i += 2
        elif sql.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    raise UnterminatedError("comment", start)


def significant(sql: str, stop=None) -> list[Token]:
    return [t for t in lex(sql, stop) if t.kind not in (SPACE, COMMENT)]


def unquote_identifier(token: Token) -> str:
    if token.kind == QUOTED_IDENT:
        quote = token.text[0]
        body = token.text[1:-1]
        return body.replace(quote * 2, quote).replace("\\" + quote, quote)
    return token.text


@dataclass(frozen=True)
class Statement:
    """The query text the engine should run, and where inline INSERT data begins."""

    kind: str  # upper-cased first keyword, e.g. SELECT, INSERT, CREATE
    sql: str  # the statement without trailing semicolon and without INSERT data
    insert_format: str | None  # for INSERT with data: the input format
    data_offset: int | None  # offset of inline data in the full text, if any
    output_format: str | None  # a FORMAT clause of a non-INSERT statement
    trailing_statement_at: int | None  # position of a second statement, if one follows


def analyse(sql: str) -> Statement:
    """Split the full request text (URL query + body) the way ClickHouse's HTTP handler does.

    For INSERT ... FORMAT X and INSERT ... VALUES, lexing stops where the data begins, so a
    binary body is never lexed. Everything else must be a single statement.
    """
    tokens: list[Token] = []
    state = {"insert": False, "format_at": None, "values_at": None}

    def stop(tok: Token, prev: Token | None) -> bool:
        tokens.append(tok)
        if len(tokens) == 1:
            state["insert"] = tok.is_word("INSERT")
            return False
        if not state["insert"]:
            return False
        if prev is not None and prev.is_word("FORMAT") and tok.kind in (WORD, QUOTED_IDENT):
            state["format_at"] = len(tokens) - 1
            return True
        if tok.is_word("VALUES") and not _inside_parens(tokens):
            state["values_at"] = len(tokens) - 1
            return True
        if tok.is_word("SELECT", "WITH") and not _inside_parens(tokens):
            # INSERT ... SELECT: an ordinary single statement from here on.
            state["insert"] = False
        return False

    for _ in lex(sql, stop):
        pass
    kind = tokens[0].text.upper() if tokens and tokens[0].kind == WORD else ""
    if state["format_at"] is not None:
        fmt_token = tokens[state["format_at"]]
        statement_sql = sql[: tokens[state["format_at"] - 1].start].rstrip()
        return Statement(
            kind, statement_sql, unquote_identifier(fmt_token), _data_start(sql, fmt_token.end), None, None
        )
    if state["values_at"] is not None:
        values_token = tokens[state["values_at"]]
        return Statement(kind, sql[: values_token.start].rstrip(), "Values", values_token.end, None, None)

    end = len(sql)
    trailing = None
    for index, tok in enumerate(tokens):
        if tok.kind == SEMICOLON:
            rest = [t for t in tokens[index + 1 :] if t.kind != SEMICOLON]
            if rest:
                trailing = rest[0].start
            end = tok.start
            break
    statement_sql = sql[:end].rstrip()
    body = [t for t in tokens if t.start < end]
    return Statement(kind, statement_sql, None, None, _output_format(body), trailing)


def _inside_parens(tokens: list[Token]) -> bool:
    depth = 0
    for tok in tokens:
        if tok.kind == PUNCT and tok.text == "(":
            depth += 1
        elif tok.kind == PUNCT and tok.text == ")":
            depth -= 1
    return depth > 0


def _data_start(sql: str, after_format: int) -> int:
    """ClickHouse skips blanks after the format name and then at most one line break."""
    i = after_format
    n = len(sql)
    while i < n and sql[i] in " \t":
        i += 1
    if sql.startswith("\r\n", i):
        return i + 2
    if i < n and sql[i] == "\n":
        return i + 1
    return i


def _output_format(tokens: list[Token]) -> str | None:
    """The last top-level `FORMAT name` clause, if any."""
    depth = 0
    found = None
    for index, tok in enumerate(tokens):
        if tok.kind == PUNCT and tok.text == "(":
            depth += 1
        elif tok.kind == PUNCT and tok.text == ")":
            depth -= 1
        elif depth == 0 and tok.is_word("FORMAT") and index + 1 < len(tokens):
            nxt = tokens[index + 1]
            if nxt.kind in (WORD, QUOTED_IDENT):
                found = unquote_identifier(nxt)
    return found


# --- query id correlation ----------------------------------------------------------------
#
# chDB cannot run a query under a caller-chosen query_id, so the server tags every query it
# runs with `log_comment = <query id>` and presents that id wherever ClickHouse would show the
# query id: in system.processes, system.query_log and KILL QUERY conditions.

PROCESSES_QUERY_ID = "if(Settings['log_comment'] != '', Settings['log_comment'], query_id)"
QUERY_LOG_QUERY_ID = "if(log_comment != '', log_comment, query_id)"

_CORRELATED_TABLES = {
    "processes": f"(SELECT * REPLACE ({PROCESSES_QUERY_ID} AS query_id) FROM system.processes)",
    "query_log": f"(SELECT * REPLACE ({QUERY_LOG_QUERY_ID} AS query_id) FROM system.query_log)",
}


def correlate_query_ids(sql: str) -> str:
    """Replace references to system.processes / system.query_log by views that show the
    caller's query ids. Returns `sql` unchanged when there is nothing to replace."""
    tokens = significant(sql)
    edits: list[tuple[int, int, str]] = []
    for index in range(len(tokens) - 2):
        first, dot, name = tokens[index : index + 3]
        if (
            unquote_identifier(first).lower() == "system"
            and first.kind in (WORD, QUOTED_IDENT)
            and dot.kind == PUNCT
            and dot.text == "."
            and name.kind in (WORD, QUOTED_IDENT)
        ):
            replacement = _CORRELATED_TABLES.get(unquote_identifier(name).lower())
            # A following '.' means a qualified column (system.processes.x): leave it alone.
            qualified = index + 3 < len(tokens) and tokens[index + 3].text == "."
            if replacement and not qualified:
                edits.append((first.start, name.end, replacement))
    return _splice(sql, edits)


@dataclass(frozen=True)
class KillQuery:
    sql: str  # the statement to run, with query_id references translated


def kill_query(statement: Statement) -> KillQuery | None:
    """For `KILL QUERY WHERE ...`, translate `query_id` references in the condition."""
    tokens = significant(statement.sql)
    if len(tokens) < 3 or not (tokens[0].is_word("KILL") and tokens[1].is_word("QUERY")):
        return None
    edits = [
        (tok.start, tok.end, PROCESSES_QUERY_ID)
        for tok in tokens[2:]
        if tok.kind in (WORD, QUOTED_IDENT) and unquote_identifier(tok) == "query_id"
    ]
    return KillQuery(_splice(statement.sql, edits))


def _splice(sql: str, edits: list[tuple[int, int, str]]) -> str:
    if not edits:
        return sql
    out = []
    last = 0
    for start, end, text in edits:
        out.append(sql[last:start])
        out.append(text)
        last = end
    out.append(sql[last:])
    return "".join(out)


def set_statement_names(statement: Statement) -> set[str]:
    """The setting names a `SET a = 1, b = 2` statement assigns."""
    tokens = significant(statement.sql)
    names = set()
    for index in range(1, len(tokens) - 1):
        if tokens[index + 1].text == "=" and tokens[index].kind in (WORD, QUOTED_IDENT):
            previous = tokens[index - 1]
            if previous.is_word("SET") or previous.text == ",":
                names.add(unquote_identifier(tokens[index]))
    return names


def creates_kafka_table(statement: Statement) -> str | None:
    """For CREATE/ATTACH TABLE ... ENGINE = Kafka, the table name as written (else None)."""
    tokens = significant(statement.sql)
    if not tokens or not tokens[0].is_word("CREATE", "ATTACH"):
        return None
    index = 1
    while index < len(tokens) and tokens[index].is_word("OR", "REPLACE", "TEMPORARY"):
        index += 1
    if index >= len(tokens) or not tokens[index].is_word("TABLE"):
        return None
    index += 1
    if index + 2 < len(tokens) and tokens[index].is_word("IF"):
        index += 3  # IF NOT EXISTS
    name_parts = []
    while index < len(tokens) and tokens[index].kind in (WORD, QUOTED_IDENT):
        name_parts.append(unquote_identifier(tokens[index]))
        if index + 1 < len(tokens) and tokens[index + 1].text == ".":
            index += 2
            continue
        break
    for position in range(len(tokens) - 2):
        if tokens[position].is_word("ENGINE") and tokens[position + 1].text == "=":
            if tokens[position + 2].is_word("KAFKA"):
                return ".".join(name_parts)
    return None
