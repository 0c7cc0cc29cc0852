//! The RMPP receiver (IBA 13.6.6): see the module above.
