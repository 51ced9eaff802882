//! The sandbox vendor and its adapter, end to end over loopback HTTP: no mocks, the real
//! server on 127.0.0.1:0 and the real adapter, with the server's ledger as the judge; and the
//! adapter against herald's conformance kit (`conformance`), which plays every answer the
//! sandbox documents and every transport fault from a scripted server.

mod conformance;
mod faults;
mod profiles;
mod support;
