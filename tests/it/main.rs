//! Integration tests: the real relay (`hookrelay::run`) against a real `redis-server` started per
//! test and real HTTP receivers on loopback.

mod support;

mod api;
mod authoring;
mod binary;
mod catalogue;
mod cli;
mod cluster;
mod dashboards;
mod deliveries;
mod delivery;
mod docs;
mod durability;
mod events;
mod faults;
mod fleet;
mod from_reference;
mod hostile;
mod integrator;
mod long_run;
mod monitoring;
mod own_dashboard;
mod plugin_isolation;
mod plugin_reload;
mod plugin_tools;
mod plugins;
mod recovery;
mod restart;
mod rules;
mod secrets;
mod sentinel;
mod sources;
mod status_page;
mod upgrade;
mod xapi;
