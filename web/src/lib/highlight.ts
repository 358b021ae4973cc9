// SQL as coloured tokens, for reading compiled queries and statements. A scanner, not a
// parser: it only has to tell comments, string literals, quoted names, numbers and
// keywords from the rest, and give back every character of the text in order (the page
// renders the tokens as text, never as HTML).

export type TokenKind = "keyword" | "string" | "identifier" | "number" | "comment" | "function" | "plain";

export interface Token {
  kind: TokenKind;
  text: string;
}

const KEYWORDS = new Set(
  `select from where group by order having limit offset with as on join left right inner outer full cross
  union all distinct and or not in is null like ilike between case when then else end create table view
  materialized to engine partition primary key settings ttl insert into values if exists replace drop
  alter add column default array asc desc interval final prewhere sample over window rows range preceding
  following current row using global any format comment database nulls first last true false`
    .split(/\s+/)
    .filter(Boolean),
);

/** Every character of `sql`, in order, as tokens. */
export function highlight(sql: string): Token[] {
  const tokens: Token[] = [];
  const push = (kind: TokenKind, text: string) => {
    const last = tokens[tokens.length - 1];
    if (last && last.kind === kind && kind === "plain") last.text += text;
    else tokens.push({ kind, text });
  };
  let i = 0;
  while (i < sql.length) {
    const rest = sql.slice(i);
    const c = sql[i];
    let match: RegExpExecArray | null;
    if (rest.startsWith("--")) {
      const end = sql.indexOf("\n", i);
      const to = end === -1 ? sql.length : end;
      push("comment", sql.slice(i, to));
      i = to;
    } else if (rest.startsWith("/*")) {
      const end = sql.indexOf("*/", i + 2);
      const to = end === -1 ? sql.length : end + 2;
      push("comment", sql.slice(i, to));
      i = to;
    } else if (c === "'" || c === '"' || c === "`") {
      // A quoted text up to its closing quote, backslash escapes and doubled quotes kept.
      let j = i + 1;
      while (j < sql.length) {
        if (sql[j] === "\\") j += 2;
        else if (sql[j] === c && sql[j + 1] === c) j += 2;
        else if (sql[j] === c) break;
        else j += 1;
      }
      const to = Math.min(j + 1, sql.length);
      push(c === "'" ? "string" : "identifier", sql.slice(i, to));
      i = to;
    } else if ((match = /^\d+(\.\d+)?([eE][+-]?\d+)?/.exec(rest))) {
      push("number", match[0]);
      i += match[0].length;
    } else if ((match = /^[A-Za-z_][A-Za-z0-9_]*/.exec(rest))) {
      const word = match[0];
      const after = sql.slice(i + word.length).match(/^\s*\(/);
      if (KEYWORDS.has(word.toLowerCase())) push("keyword", word);
      else if (after) push("function", word);
      else push("plain", word);
      i += word.length;
    } else {
      push("plain", c);
      i += 1;
    }
  }
  return tokens;
}
