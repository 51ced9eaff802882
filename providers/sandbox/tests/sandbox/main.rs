//! The sandbox vendor and its adapter, end to end over loopback HTTP: no mocks, the real
//! server on 127.0.0.1:0 and the real adapter, with the server's ledger as the judge.

mod faults;
mod profiles;
mod support;
