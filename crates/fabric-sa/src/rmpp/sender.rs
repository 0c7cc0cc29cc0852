//! The RMPP sender (IBA 13.6.5): see the module above.
