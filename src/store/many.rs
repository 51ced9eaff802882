//! Statements over many rows at once: a multi-row `VALUES` list per chunk, so that a group of
//! enqueues or records writes each table in a few round trips rather than one per row. Chunks
//! are powers of two up to [`CHUNK`] rows (one statement per set bit of the count below it), so
//! each statement has eight texts, not one per count, for the drivers' statement caches to keep
//! prepared; the text is the same in both dialects. (The claim's statements take their lists as
//! one JSON or array value instead, each dialect its own way: they read and write few columns.)

use std::sync::OnceLock;

use super::StoreResult;
use super::seam::{Arg, Conn, Row};

/// The most rows one statement carries: 128 notifications bind 2,048 values, far inside both
/// databases' limits (SQLite's 32,766, PostgreSQL's 65,535).
const CHUNK: usize = 128;
/// The chunk sizes: 1, 2, 4, … [`CHUNK`].
const SIZES: usize = CHUNK.trailing_zeros() as usize + 1;

/// A statement whose `row` — a `VALUES` tuple written for one row, `$1` to `$width` — is
/// repeated once per row, numbered on.
pub(super) struct Rows {
    head: &'static str,
    row: &'static str,
    width: usize,
    tail: &'static str,
    texts: OnceLock<Vec<String>>,
}

impl Rows {
    pub(super) const fn new(
        head: &'static str,
        row: &'static str,
        width: usize,
        tail: &'static str,
    ) -> Rows {
        Rows {
            head,
            row,
            width,
            tail,
            texts: OnceLock::new(),
        }
    }

    /// Runs the statement over `items`, a chunk at a time; `bind` adds one item's `width`
    /// values.
    pub(super) async fn execute<T>(
        &'static self,
        conn: &mut impl Conn,
        items: &[T],
        bind: impl Fn(&T, &mut Vec<Arg>),
    ) -> StoreResult<()> {
        for (sql, chunk) in self.chunks(items) {
            conn.execute(sql, self.args(chunk, &bind)).await?;
        }
        Ok(())
    }

    /// [`Rows::execute`] for a statement that returns rows (`RETURNING`, or a `SELECT` whose
    /// `IN` list is the `VALUES`): every chunk's, in order.
    pub(super) async fn fetch_all<T, R: Row>(
        &'static self,
        conn: &mut impl Conn,
        items: &[T],
        bind: impl Fn(&T, &mut Vec<Arg>),
    ) -> StoreResult<Vec<R>> {
        let mut rows = Vec::new();
        for (sql, chunk) in self.chunks(items) {
            rows.extend(conn.fetch_all(sql, self.args(chunk, &bind)).await?);
        }
        Ok(rows)
    }

    fn chunks<'a, T>(
        &'static self,
        items: &'a [T],
    ) -> impl Iterator<Item = (&'static str, &'a [T])> {
        let mut rest = items;
        chunk_sizes(items.len()).map(move |size| {
            let (chunk, after) = rest.split_at(size);
            rest = after;
            (self.sql(size), chunk)
        })
    }

    fn args<T>(&self, chunk: &[T], bind: &impl Fn(&T, &mut Vec<Arg>)) -> Vec<Arg> {
        let mut args = Vec::with_capacity(chunk.len() * self.width);
        for item in chunk {
            bind(item, &mut args);
        }
        args
    }

    /// The text for `rows` rows, a power of two up to [`CHUNK`].
    fn sql(&'static self, rows: usize) -> &'static str {
        let texts = self
            .texts
            .get_or_init(|| (0..SIZES).map(|i| self.text(1 << i)).collect());
        &texts[rows.trailing_zeros() as usize]
    }

    fn text(&self, rows: usize) -> String {
        let tuples: Vec<String> = (0..rows)
            .map(|r| renumber(self.row, r * self.width))
            .collect();
        format!("{}{}{}", self.head, tuples.join(", "), self.tail)
    }
}

/// `n` rows as chunk sizes: as many full chunks as fit, then the powers of two of the rest.
fn chunk_sizes(n: usize) -> impl Iterator<Item = usize> {
    let rest = n % CHUNK;
    std::iter::repeat_n(CHUNK, n / CHUNK).chain(
        (0..SIZES - 1)
            .rev()
            .map(|i| 1 << i)
            .filter(move |size| rest & size != 0),
    )
}

/// `row` with each `$k` made `$(k + offset)`.
fn renumber(row: &str, offset: usize) -> String {
    let mut out = String::with_capacity(row.len() + 8);
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c != '$' {
            continue;
        }
        let mut digits = String::new();
        while let Some(d) = chars.next_if(char::is_ascii_digit) {
            digits.push(d);
        }
        match digits.parse::<usize>() {
            Ok(k) => out.push_str(&(k + offset).to_string()),
            Err(_) => out.push_str(&digits),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_split_into_full_chunks_then_powers_of_two() {
        assert_eq!(chunk_sizes(0).collect::<Vec<_>>(), Vec::<usize>::new());
        assert_eq!(chunk_sizes(1).collect::<Vec<_>>(), [1]);
        assert_eq!(chunk_sizes(7).collect::<Vec<_>>(), [4, 2, 1]);
        assert_eq!(chunk_sizes(128).collect::<Vec<_>>(), [128]);
        assert_eq!(
            chunk_sizes(1000).collect::<Vec<_>>(),
            [128, 128, 128, 128, 128, 128, 128, 64, 32, 8]
        );
        for n in 0..600 {
            let sizes: Vec<usize> = chunk_sizes(n).collect();
            assert_eq!(sizes.iter().sum::<usize>(), n);
            assert!(sizes.iter().all(|s| s.is_power_of_two() && *s <= CHUNK));
        }
    }

    #[test]
    fn each_row_is_numbered_on_from_the_last() {
        static STATEMENT: Rows = Rows::new(
            "INSERT INTO t (a, b, c) VALUES ",
            "($1, $2, $2, 7)",
            2,
            " RETURNING a",
        );
        assert_eq!(
            STATEMENT.sql(1),
            "INSERT INTO t (a, b, c) VALUES ($1, $2, $2, 7) RETURNING a"
        );
        assert_eq!(
            STATEMENT.sql(4),
            "INSERT INTO t (a, b, c) VALUES ($1, $2, $2, 7), ($3, $4, $4, 7), \
             ($5, $6, $6, 7), ($7, $8, $8, 7) RETURNING a"
        );
        assert_eq!(renumber("($9, $10, '$')", 10), "($19, $20, '$')");
    }
}
