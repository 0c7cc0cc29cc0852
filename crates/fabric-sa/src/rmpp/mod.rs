//! RMPP (IBA vol. 1 13.6): segmentation of multi-MAD answers. Pure state machines given `now`:
//! the sender (segments, window, ACK, resend on timeout, STOP/ABORT) and the receiver
//! (reassembly, ACKs) that the project's own SA client uses.
//!
//! Layout: `sender` (the SA side: one transfer per answered GetTable/GetMulti) and `receiver`
//! (the client side, and the SA's intake of multi-MAD GetMulti requests).

pub mod receiver;
pub mod sender;
