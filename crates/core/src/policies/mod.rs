//! The policies. Each file holds one policy and its `REGISTERED` entry;
//! `cache` is the classic-caching building block several of them share.

pub mod cache;
pub mod classic;
pub mod lbica;
pub mod nhc;
pub mod passthrough;
pub mod sib;
pub mod split;
