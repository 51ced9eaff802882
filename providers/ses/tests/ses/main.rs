//! Herald's SES adapter against the fake SES and SNS, end to end over loopback HTTP: no mocks,
//! the real fake on 127.0.0.1:0 and the real adapter, with the fake's ledger as the judge; and
//! against herald's conformance kit (`conformance`). `callbacks` reads SNS messages signed as
//! SNS signs them, checked beside AWS's own validator (`sns-validator`).

mod answers;
mod callbacks;
mod conformance;
mod secrets;
mod support;
