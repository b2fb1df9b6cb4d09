//! Background activities on the simulated clock: each implements the engine's `Daemon` in its
//! own file and drives mechanisms the VM owns.

pub mod kcompactd;
pub mod khugepaged;
pub mod pagedaemon;
pub mod quicksilver;
