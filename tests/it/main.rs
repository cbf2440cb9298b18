//! Integration tests: the real relay (`hookrelay::run`) against a real `redis-server` started per
//! test and real HTTP receivers on loopback.

mod support;

mod api;
mod authoring;
mod bbb_web;
mod beyond;
mod binary;
mod busy;
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
mod give_up;
mod hostile;
mod integrator;
mod listeners;
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
mod schemas;
mod secrets;
mod security;
mod sentinel;
mod sources;
mod standard_webhooks;
mod status_page;
mod takeover;
mod tenants;
mod upgrade;
mod xapi;
