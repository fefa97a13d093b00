//! Tables as text, the same for every format: a line per row, cells separated by
//! [`CELL_SEPARATOR`] with their whitespace collapsed, rows without any text left out.

/// Between the cells of a table row. The chunker recognises tables by it (and cuts them
/// between rows), and a document's page text joins the cut pieces again.
pub const CELL_SEPARATOR: &str = " | ";

/// Collects the rows of one table while a parser walks it.
#[derive(Debug, Default)]
pub(crate) struct TableText {
    rows: Vec<String>,
    row: Vec<String>,
    cell: String,
}

impl TableText {
    /// Starts a row.
    pub(crate) fn start_row(&mut self) {
        self.row.clear();
    }

    /// Starts a cell.
    pub(crate) fn start_cell(&mut self) {
        self.cell.clear();
    }

    /// Adds a paragraph of text to the current cell.
    pub(crate) fn push_text(&mut self, text: &str) {
        if !self.cell.is_empty() {
            self.cell.push(' ');
        }
        self.cell.push_str(text.trim());
    }

    /// Closes the current cell.
    pub(crate) fn end_cell(&mut self) {
        let cell = std::mem::take(&mut self.cell);
        self.row.push(collapse(&cell));
    }

    /// Closes the current row.
    pub(crate) fn end_row(&mut self) {
        if let Some(line) = row_line(&self.row) {
            self.rows.push(line);
        }
    }

    /// The table's text, or `None` when no row had text; the collector is then ready for the
    /// next table.
    pub(crate) fn finish(&mut self) -> Option<String> {
        let rows = std::mem::take(&mut self.rows);
        (!rows.is_empty()).then(|| rows.join("\n"))
    }
}

/// One row as a line, or `None` when all its cells are empty.
pub(crate) fn row_line(cells: &[String]) -> Option<String> {
    cells
        .iter()
        .any(|c| !c.is_empty())
        .then(|| cells.join(CELL_SEPARATOR))
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_lines_and_empty_rows_vanish() {
        let mut table = TableText::default();
        for row in [["Part", "Qty"], ["", ""], ["Seal\n ring", "2"]] {
            table.start_row();
            for cell in row {
                table.start_cell();
                table.push_text(cell);
                table.end_cell();
            }
            table.end_row();
        }
        assert_eq!(table.finish().as_deref(), Some("Part | Qty\nSeal ring | 2"));
        assert_eq!(table.finish(), None);
    }
}
