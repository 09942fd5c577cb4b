//! One module per API. `opencl` is always one side of a pair; the other side implements
//! [`PeerRuntime`].

pub mod host;
pub mod locate;
pub mod opencl;
