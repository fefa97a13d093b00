//! Pages read so far, for people watching a long document being parsed: a 600-page scan
//! takes minutes, and "parsing" alone says nothing about how far it has come.
//!
//! Parsers stay pure functions of their bytes, so the observer is not a parameter threaded
//! through every format: the caller installs one for the current thread around the parse
//! ([`observe`]), and the formats that read page by page report to it ([`page_done`]). Without
//! an observer a report costs a thread-local lookup.

use std::cell::RefCell;

/// What is told `(pages done, pages in all)`.
type Observer = Box<dyn FnMut(u32, u32)>;

thread_local! {
    static OBSERVER: RefCell<Option<Observer>> = const { RefCell::new(None) };
}

/// Runs `parse` with `observer` told `(pages done, pages in all)` as pages are read, on this
/// thread; the previous observer (if any) is back in place afterwards, also when `parse`
/// unwinds.
pub fn observe<R>(observer: impl FnMut(u32, u32) + 'static, parse: impl FnOnce() -> R) -> R {
    /// Puts the previous observer back when dropped.
    struct Restore(Option<Observer>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            OBSERVER.with(|slot| *slot.borrow_mut() = previous);
        }
    }
    let previous = OBSERVER.with(|slot| slot.borrow_mut().replace(Box::new(observer)));
    let _restore = Restore(previous);
    parse()
}

/// Page `done` of `total` has been read; told to this thread's observer, if there is one.
pub(crate) fn page_done(done: u32, total: u32) {
    OBSERVER.with(|slot| {
        // An observer that reports a page itself (it never does) would find the slot taken
        // and is skipped rather than panicking.
        if let Ok(mut observer) = slot.try_borrow_mut()
            && let Some(observer) = observer.as_mut()
        {
            observer(done, total);
        }
    });
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;
    use crate::ParseLimits;

    #[test]
    fn pdf_pages_are_reported_in_order_to_the_observer_of_this_thread_only() {
        let pdf = crate::fixtures::pdf(&[("one", None), ("two", None), ("three", None)]);
        let seen = Rc::new(RefCell::new(Vec::new()));
        let sink = Rc::clone(&seen);
        let parsed = observe(
            move |done, total| sink.borrow_mut().push((done, total)),
            || crate::parse(&pdf, "a.pdf", "", &ParseLimits::default()),
        );
        assert_eq!(parsed.unwrap().page_count, 3);
        assert_eq!(*seen.borrow(), vec![(1, 3), (2, 3), (3, 3)]);
        // Outside `observe` nobody is told.
        crate::parse(&pdf, "a.pdf", "", &ParseLimits::default()).unwrap();
        assert_eq!(seen.borrow().len(), 3);
    }
}
