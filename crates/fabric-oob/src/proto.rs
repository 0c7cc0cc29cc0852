//! Code generated from `proto/fabric/agent/v1/agent.proto` (prost messages, tonic client and
//! server for `SwitchAgent` and the simulator's `SimControl`).
#![allow(missing_docs, clippy::all)]

tonic::include_proto!("fabric.agent.v1");
