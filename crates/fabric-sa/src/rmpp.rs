//! RMPP (IBA vol. 1 13.6): segmentation of multi-MAD answers. Pure state machines given `now`:
//! the sender (segments, window, ACK, resend on timeout, STOP/ABORT) and the receiver
//! (reassembly, ACKs) that the project's own SA client uses.
