//! Tests of [`Pattern`]: the published examples of the EventBridge user guide and of the
//! event-ruler README (each citing where it comes from), cases LocalStack recorded against AWS,
//! then the semantics one at a time, and invalid patterns with the paths of their errors.
//!
//! Most tests are tables, `[pattern, event, whether it matches]` or `[pattern, error path]`.

use super::*;
use serde_json::{Value, json};

fn compile(pattern: &Value) -> Pattern {
    Pattern::compile(pattern).unwrap_or_else(|e| panic!("{pattern} should compile: {e}"))
}

/// Asserts, for each `[pattern, event, expected]` of `cases`, whether the event matches.
#[track_caller]
fn check(cases: Value) {
    for case in cases.as_array().expect("an array of cases") {
        let (pattern, event) = (&case[0], &case[1]);
        let expected = case[2]
            .as_bool()
            .unwrap_or_else(|| panic!("no expectation in {case}"));
        let got = compile(pattern).matches(event);
        assert_eq!(got, expected, "pattern {pattern} on event {event}");
    }
}

/// Asserts, for each `[pattern, path]` of `cases`, that the pattern is rejected at `path`.
#[track_caller]
fn rejects(cases: Value) {
    for case in cases.as_array().expect("an array of cases") {
        match Pattern::compile(&case[0]) {
            Ok(_) => panic!("{} should be rejected", case[0]),
            Err(e) => assert_eq!(Some(e.path.as_str()), case[1].as_str(), "{e}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The EventBridge user guide, https://docs.aws.amazon.com/eventbridge/latest/userguide/
// ---------------------------------------------------------------------------------------------

/// The EC2 event of the guide's "Amazon EventBridge event patterns" page.
fn guide_ec2_event() -> Value {
    json!({
        "version": "0",
        "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        "detail-type": "EC2 Instance State-change Notification",
        "source": "aws.ec2",
        "account": "111122223333",
        "time": "2017-12-22T18:43:48Z",
        "region": "us-west-1",
        "resources": ["arn:aws:ec2:us-west-1:123456789012:instance/i-1234567890abcdef0"],
        "detail": { "instance-id": "i-1234567890abcdef0", "state": "terminated" }
    })
}

// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html:
// the pattern selecting EC2 instance-termination events; every field it names is required.
#[test]
fn guide_instance_termination() {
    let pattern = json!({
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Instance State-change Notification"],
        "detail": { "state": ["terminated"] }
    });
    let event = guide_ec2_event();
    let mut running = event.clone();
    running["detail"]["state"] = json!("running");
    let mut no_detail = event.clone();
    if let Some(obj) = no_detail.as_object_mut() {
        obj.remove("detail");
    }
    check(json!([
        [pattern, event, true],
        [pattern, running, false],
        [pattern, no_detail, false]
    ]));
}

// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern.html,
// "Matching event values": events from EC2 or Fargate.
#[test]
fn guide_matching_event_values() {
    let pattern = json!({ "source": ["aws.ec2", "aws.fargate"] });
    check(json!([
        [pattern, guide_ec2_event(), true],
        [pattern, { "source": "aws.fargate" }, true],
        [pattern, { "source": "aws.s3" }, false]
    ]));
}

// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html,
// "Value matching" (in the guide's sources as archived in awsdocs/amazon-eventbridge-user-guide):
// a Macie finding with a severity score of 1 and a count of 2.
#[test]
fn guide_value_matching() {
    let pattern = json!({
        "source": ["aws.macie"],
        "detail-type": ["Macie Finding"],
        "detail": { "severity": { "score": [1] }, "count": [2] }
    });
    let finding = |score: i64| {
        json!({
            "version": "0",
            "detail-type": "Macie Finding",
            "source": "aws.macie",
            "detail": {
                "schemaVersion": "1.0",
                "severity": { "score": score, "description": "Low" },
                "count": 2
            }
        })
    };
    check(json!([
        [pattern, finding(1), true],
        [pattern, finding(3), false]
    ]));
}

// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-null-values.html:
// null values and empty strings match, and are not interchangeable.
#[test]
fn guide_null_values_and_empty_strings() {
    let event = json!({
        "version": "0",
        "id": "3e3c153a-8339-4e30-8c35-687ebef853fe",
        "detail-type": "EC2 Instance Launch Successful",
        "source": "aws.autoscaling",
        "resources": [],
        "detail": { "eventVersion": "", "responseElements": null }
    });
    check(json!([
        [{ "detail": { "eventVersion": [""] } }, event, true],
        [{ "detail": { "responseElements": [null] } }, event, true],
        [{ "detail": { "eventVersion": [null] } }, event, false],
        [{ "detail": { "responseElements": [""] } }, event, false]
    ]));
}

// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-arrays.html:
// a pattern array matches an event array when they intersect.
#[test]
fn guide_arrays() {
    let pattern = json!({
        "resources": [
            "arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f",
            "arn:aws:ec2:us-east-1:111122223333:instance/i-b188560f",
            "arn:aws:ec2:us-east-1:444455556666:instance/i-b188560f"
        ]
    });
    let asg = "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:\
               eb56d16b-bbf0-401d-b893-d5978ed4a025:autoScalingGroupName/ASGTerminate";
    let instance = "arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f";
    check(json!([
        [pattern, { "resources": [asg, instance] }, true],
        [pattern, { "resources": [asg] }, false]
    ]));
}

// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-content-based-filtering.html,
// "Prefix matching", "Prefix matching while ignoring case", "Suffix matching" and "Suffix
// matching while ignoring case".
#[test]
fn guide_prefix_and_suffix() {
    let service =
        json!({ "detail": { "service": [{ "prefix": { "equals-ignore-case": "EventB" } }] } });
    let png = json!({ "detail": { "FileName": [{ "suffix": { "equals-ignore-case": ".png" } }] } });
    check(json!([
        [{ "time": [{ "prefix": "2017-10-02" }] }, { "time": "2017-10-02T18:43:48Z" }, true],
        [{ "time": [{ "prefix": "2017-10-02" }] }, { "time": "2017-10-03T18:43:48Z" }, false],
        [service, { "detail": { "service": "EventBridge" } }, true],
        [service, { "detail": { "service": "EVENTBRIDGE" } }, true],
        [service, { "detail": { "service": "eventbus" } }, true],
        [service, { "detail": { "service": "Lambda" } }, false],
        [{ "FileName": [{ "suffix": ".png" }] }, { "FileName": "image.png" }, true],
        [{ "FileName": [{ "suffix": ".png" }] }, { "FileName": "image.PNG" }, false],
        [png, { "detail": { "FileName": "image.PNG" } }, true],
        [png, { "detail": { "FileName": "image.png" } }, true],
        [png, { "detail": { "FileName": "image.jpg" } }, false]
    ]));
}

// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-content-based-filtering.html,
// "Anything-but matching": a string, a number, a list of strings, a list of numbers, a prefix.
#[test]
fn guide_anything_but() {
    let state = json!({ "detail": { "state": [{ "anything-but": "initializing" }] } });
    let limit = json!({ "detail": { "x-limit": [{ "anything-but": 123 }] } });
    let states = json!({ "detail": { "state": [{ "anything-but": ["stopped", "overloaded"] }] } });
    let limits = json!({ "detail": { "x-limit": [{ "anything-but": [100, 200, 300] }] } });
    let init = json!({ "detail": { "state": [{ "anything-but": { "prefix": "init" } }] } });
    check(json!([
        [state, { "detail": { "state": "pending" } }, true],
        [state, { "detail": { "state": "initializing" } }, false],
        [limit, { "detail": { "x-limit": 789 } }, true],
        [limit, { "detail": { "x-limit": 123 } }, false],
        [states, { "detail": { "state": "pending" } }, true],
        [states, { "detail": { "state": "stopped" } }, false],
        [limits, { "detail": { "x-limit": 999 } }, true],
        [limits, { "detail": { "x-limit": 300 } }, false],
        [init, { "detail": { "state": "post-init" } }, true],
        [init, { "detail": { "state": "init-prefix" } }, false]
    ]));
}

// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-content-based-filtering.html,
// "Numeric matching" and "IP address matching".
#[test]
fn guide_numeric_and_ip_address() {
    let numeric = json!({
        "detail": {
            "c-count": [{ "numeric": [">", 0, "<=", 5] }],
            "d-count": [{ "numeric": ["<", 10] }],
            "x-limit": [{ "numeric": ["=", 3.018e2] }]
        }
    });
    let ip = json!({ "detail": { "sourceIPAddress": [{ "cidr": "10.0.0.0/24" }] } });
    check(json!([
        [numeric, { "detail": { "c-count": 3, "d-count": 9, "x-limit": 301.8 } }, true],
        [numeric, { "detail": { "c-count": 42, "d-count": 9, "x-limit": 301.8 } }, false],
        [numeric, { "detail": { "c-count": 3, "d-count": 9, "x-limit": 301.9 } }, false],
        [ip, { "detail": { "sourceIPAddress": "10.0.0.0" } }, true],
        [ip, { "detail": { "sourceIPAddress": "10.0.0.255" } }, true],
        [ip, { "detail": { "sourceIPAddress": "10.0.1.0" } }, false],
        [ip, { "detail": { "sourceIPAddress": "10.0.0.256" } }, false]
    ]));
}

// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-content-based-filtering.html,
// "Exists matching": the example event matches; the one whose `detail` has no `state` (only an
// object `c-count`) does not. "Equals-ignore-case matching": its example event holds
// `detail-type` as an array.
#[test]
fn guide_exists_and_equals_ignore_case() {
    let exists = json!({ "detail": { "state": [{ "exists": true }] } });
    let pending = json!({
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": "EC2 Instance State-change Notification",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2015-11-11T21:29:54Z",
        "region": "us-east-1",
        "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-abcd1111"],
        "detail": { "instance-id": "i-abcd1111", "state": "pending" }
    });
    let no_state = json!({
        "detail-type": ["EC2 Instance State-change Notification"],
        "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-02ebd4584a2ebd341"],
        "detail": { "c-count": { "c1": 100 } }
    });
    let any_case = json!({ "detail-type": [{ "equals-ignore-case": "ec2 instance state-change notification" }] });
    check(json!([
        [exists, pending, true],
        [exists, no_state, false],
        [any_case, no_state, true],
        [any_case, { "detail-type": "EC2 Instance Launch" }, false]
    ]));
}

// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-content-based-filtering.html,
// "Complex example with multiple matching".
#[test]
fn guide_complex_example() {
    let pattern = json!({
        "time": [{ "prefix": "2017-10-02" }],
        "detail": {
            "state": [{ "anything-but": "initializing" }],
            "c-count": [{ "numeric": [">", 0, "<=", 5] }],
            "d-count": [{ "numeric": ["<", 10] }],
            "x-limit": [{ "anything-but": [100, 200, 300] }]
        }
    });
    let event = |limit: i64| {
        json!({
            "time": "2017-10-02T18:43:48Z",
            "detail": { "state": "processing", "c-count": 3, "d-count": 9, "x-limit": limit }
        })
    };
    check(json!([
        [pattern, event(999), true],
        [pattern, event(300), false]
    ]));
}

// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-content-based-filtering.html,
// the note under the complex example: of a key given twice, the last counts (serde_json keeps
// the last one, as EventBridge does).
#[test]
fn guide_repeated_key_keeps_the_last() {
    let text = r#"{ "detail": { "location": [ { "prefix": "us-" } ],
                                "location": [ { "anything-but": "us-east" } ] } }"#;
    let pattern: Value = serde_json::from_str(text).expect("valid JSON");
    check(json!([
        [pattern, { "detail": { "location": "eu-central-1" } }, true],
        [pattern, { "detail": { "location": "us-east" } }, false]
    ]));
}

// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-content-based-filtering.html,
// "Complex example with `$or` matching" (the events are LocalStack's complex_or and
// complex_or_NEG, below).
#[test]
fn guide_or() {
    let pattern = json!({
        "detail": {
            "$or": [
                { "c-count": [{ "numeric": [">", 0, "<=", 5] }] },
                { "d-count": [{ "numeric": ["<", 10] }] },
                { "x-limit": [{ "numeric": ["=", 3.018e2] }] }
            ]
        }
    });
    check(json!([
        [pattern, { "detail": { "c-count": 0, "d-count": 0, "x-limit": 9.018e2 } }, true],
        [pattern, { "detail": { "c-count": 0, "d-count": 10, "x-limit": 9.018e2 } }, false],
        [pattern, { "detail": { "c-count": 0, "d-count": 10, "x-limit": 301.8 } }, true]
    ]));
}

// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html:
// every row of the summary table of comparison operators, with an event that matches and one
// that does not.
#[test]
fn guide_comparison_operators_table() {
    check(json!([
        // And
        [{ "Location": ["New York"], "Day": ["Monday"] }, { "Location": "New York", "Day": "Monday" }, true],
        [{ "Location": ["New York"], "Day": ["Monday"] }, { "Location": "New York", "Day": "Sunday" }, false],
        // Anything-but
        [{ "state": [{ "anything-but": "initializing" }] }, { "state": "running" }, true],
        [{ "state": [{ "anything-but": "initializing" }] }, { "state": "initializing" }, false],
        // Anything-but (begins with)
        [{ "Region": [{ "anything-but": { "prefix": "us-" } }] }, { "Region": "eu-west-1" }, true],
        [{ "Region": [{ "anything-but": { "prefix": "us-" } }] }, { "Region": "us-east-1" }, false],
        // Anything-but (ends with)
        [{ "FileName": [{ "anything-but": { "suffix": ".png" } }] }, { "FileName": "a.jpg" }, true],
        [{ "FileName": [{ "anything-but": { "suffix": ".png" } }] }, { "FileName": "a.png" }, false],
        // Anything-but (ignore case)
        [{ "state": [{ "anything-but": { "equals-ignore-case": "initializing" } }] }, { "state": "running" }, true],
        [{ "state": [{ "anything-but": { "equals-ignore-case": "initializing" } }] }, { "state": "INITIALIZING" }, false],
        // Anything-but using a wildcard
        [{ "FilePath": [{ "anything-but": { "wildcard": "*/lib/*" } }] }, { "FilePath": "/usr/bin/tool" }, true],
        [{ "FilePath": [{ "anything-but": { "wildcard": "*/lib/*" } }] }, { "FilePath": "/usr/lib/libc.so" }, false]
    ]));
    check(json!([
        // Begins with
        [{ "Region": [{ "prefix": "us-" }] }, { "Region": "us-east-1" }, true],
        [{ "Region": [{ "prefix": "us-" }] }, { "Region": "eu-west-1" }, false],
        // Begins with (ignore case)
        [{ "service": [{ "prefix": { "equals-ignore-case": "eventb" } }] }, { "service": "EventBridge" }, true],
        [{ "service": [{ "prefix": { "equals-ignore-case": "eventb" } }] }, { "service": "Lambda" }, false],
        // Empty
        [{ "LastName": [""] }, { "LastName": "" }, true],
        [{ "LastName": [""] }, { "LastName": "Doe" }, false],
        // Equals
        [{ "Name": ["Alice"] }, { "Name": "Alice" }, true],
        [{ "Name": ["Alice"] }, { "Name": "alice" }, false],
        // Equals (ignore case)
        [{ "Name": [{ "equals-ignore-case": "alice" }] }, { "Name": "ALICE" }, true],
        [{ "Name": [{ "equals-ignore-case": "alice" }] }, { "Name": "Alicia" }, false],
        // Ends with
        [{ "FileName": [{ "suffix": ".png" }] }, { "FileName": "a.png" }, true],
        [{ "FileName": [{ "suffix": ".png" }] }, { "FileName": "a.PNG" }, false],
        // Ends with (ignore case)
        [{ "service": [{ "suffix": { "equals-ignore-case": "tBridge" } }] }, { "service": "EVENTBRIDGE" }, true],
        [{ "service": [{ "suffix": { "equals-ignore-case": "tBridge" } }] }, { "service": "EventBus" }, false]
    ]));
    check(json!([
        // Exists
        [{ "ProductName": [{ "exists": true }] }, { "ProductName": "Widget" }, true],
        [{ "ProductName": [{ "exists": true }] }, { "Product": "Widget" }, false],
        // Does not exist
        [{ "ProductName": [{ "exists": false }] }, { "Product": "Widget" }, true],
        [{ "ProductName": [{ "exists": false }] }, { "ProductName": "Widget" }, false],
        // Not
        [{ "Weather": [{ "anything-but": ["Raining"] }] }, { "Weather": "Sunny" }, true],
        [{ "Weather": [{ "anything-but": ["Raining"] }] }, { "Weather": "Raining" }, false],
        // Null
        [{ "UserID": [null] }, { "UserID": null }, true],
        [{ "UserID": [null] }, { "UserID": "null" }, false],
        // Numeric (equals)
        [{ "Price": [{ "numeric": ["=", 100] }] }, { "Price": 100 }, true],
        [{ "Price": [{ "numeric": ["=", 100] }] }, { "Price": 101 }, false],
        // Numeric (range)
        [{ "Price": [{ "numeric": [">", 10, "<=", 20] }] }, { "Price": 20 }, true],
        [{ "Price": [{ "numeric": [">", 10, "<=", 20] }] }, { "Price": 10 }, false],
        // Or
        [{ "PaymentType": ["Credit", "Debit"] }, { "PaymentType": "Debit" }, true],
        [{ "PaymentType": ["Credit", "Debit"] }, { "PaymentType": "Cash" }, false],
        // Or (multiple fields)
        [{ "$or": [{ "Location": ["New York"] }, { "Day": ["Monday"] }] }, { "Location": "Paris", "Day": "Monday" }, true],
        [{ "$or": [{ "Location": ["New York"] }, { "Day": ["Monday"] }] }, { "Location": "Paris", "Day": "Sunday" }, false],
        // Wildcard ("any file with a .png extension, located within the folder \"dir\""; our pattern)
        [{ "FileName": [{ "wildcard": "dir/*.png" }] }, { "FileName": "dir/photo.png" }, true],
        [{ "FileName": [{ "wildcard": "dir/*.png" }] }, { "FileName": "other/photo.png" }, false]
    ]));
}

// ---------------------------------------------------------------------------------------------
// The event-ruler README, https://github.com/aws/event-ruler/blob/main/README.md
// ---------------------------------------------------------------------------------------------

/// The example event of the README's "Ruler by Example".
fn ruler_event() -> Value {
    json!({
        "version": "0",
        "id": "ddddd4-aaaa-7777-4444-345dd43cc333",
        "detail-type": "EC2 Instance State-change Notification",
        "source": "aws.ec2",
        "account": "012345679012",
        "time": "2017-10-02T16:24:49Z",
        "region": "us-east-1",
        "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-000000aaaaaa00000"],
        "detail": {
            "c-count": 5,
            "d-count": 3,
            "x-limit": 301.8,
            "source-ip": "10.0.0.33",
            "instance-id": "i-000000aaaaaa00000",
            "state": "running"
        }
    })
}

/// The README's example event with `detail.<key>` set to `value`.
fn ruler_event_with(key: &str, value: Value) -> Value {
    let mut event = ruler_event();
    event["detail"][key] = value;
    event
}

// README, "Simple matching": the rule also names `resources`, an array in the event.
#[test]
fn ruler_simple_matching() {
    let pattern = json!({
        "detail-type": ["EC2 Instance State-change Notification"],
        "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-000000aaaaaa00000"],
        "detail": { "state": ["initializing", "running"] }
    });
    check(json!([
        [pattern, ruler_event(), true],
        [
            pattern,
            ruler_event_with("state", json!("initializing")),
            true
        ],
        [pattern, ruler_event_with("state", json!("stopped")), false]
    ]));
}

// README, "Prefix matching" to "Wildcard matching".
#[test]
fn ruler_string_operators() {
    let prefix_any_case = json!({ "source": [{ "prefix": { "equals-ignore-case": "EC2" } }] });
    let suffix_any_case = json!({ "source": [{ "suffix": { "equals-ignore-case": "EC2" } }] });
    let any_case = json!({ "source": [{ "equals-ignore-case": "EC2" }] });
    let wildcard = json!({ "source": [{ "wildcard": "Simple*Service" }] });
    check(json!([
        [{ "time": [{ "prefix": "2017-10-02" }] }, ruler_event(), true],
        [prefix_any_case, { "source": "ec2.amazonaws.com" }, true],
        [prefix_any_case, ruler_event(), false],
        [{ "source": [{ "suffix": "ec2" }] }, ruler_event(), true],
        [suffix_any_case, ruler_event(), true],
        [suffix_any_case, { "source": "aws.ec3" }, false],
        [any_case, { "source": "Ec2" }, true],
        [any_case, ruler_event(), false],
        [wildcard, { "source": "SimpleQueueService" }, true],
        [wildcard, { "source": "SimpleService" }, true],
        [wildcard, ruler_event(), false]
    ]));
}

// README, "Anything-but matching": every example matches the README's event, and fails on an
// event holding what it excludes.
#[test]
fn ruler_anything_but() {
    let cases = [
        ("state", json!("initializing"), json!("initializing")),
        ("x-limit", json!(123), json!(123)),
        (
            "state",
            json!(["stopped", "overloaded"]),
            json!("overloaded"),
        ),
        ("x-limit", json!([100, 200, 300]), json!(200.0)),
        ("state", json!({ "prefix": "init" }), json!("initial")),
        (
            "state",
            json!({ "prefix": ["init", "error"] }),
            json!("error: disk"),
        ),
        ("instance-id", json!({ "suffix": "1234" }), json!("i-1234")),
        (
            "instance-id",
            json!({ "suffix": ["1234", "6789"] }),
            json!("i-6789"),
        ),
        (
            "state",
            json!({ "equals-ignore-case": "Stopped" }),
            json!("STOPPED"),
        ),
        (
            "state",
            json!({ "equals-ignore-case": ["Stopped", "OverLoaded"] }),
            json!("overloaded"),
        ),
        (
            "state",
            json!({ "wildcard": "*/bin/*.jar" }),
            json!("/usr/bin/app.jar"),
        ),
        (
            "state",
            json!({ "wildcard": ["*/bin/*.jar", "*/bin/*.class"] }),
            json!("/bin/A.class"),
        ),
    ];
    for (key, anything_but, excluded) in cases {
        let pattern = json!({ "detail": { key: [{ "anything-but": anything_but }] } });
        check(json!([
            [pattern, ruler_event(), true],
            [pattern, ruler_event_with(key, excluded), false]
        ]));
    }
}

// README, "Numeric matching", "IP Address Matching" and "Complex example".
#[test]
fn ruler_numeric_ip_and_complex() {
    let numeric = json!({
        "detail": {
            "c-count": [{ "numeric": [">", 0, "<=", 5] }],
            "d-count": [{ "numeric": ["<", 10] }],
            "x-limit": [{ "numeric": ["=", 3.018e2] }]
        }
    });
    let ip = json!({ "detail": { "source-ip": [{ "cidr": "10.0.0.0/24" }] } });
    let complex = json!({
        "time": [{ "prefix": "2017-10-02" }],
        "detail": {
            "state": [{ "anything-but": "initializing" }],
            "c-count": [{ "numeric": [">", 0, "<=", 5] }],
            "d-count": [{ "numeric": ["<", 10] }],
            "x-limit": [{ "anything-but": [100, 200, 300] }],
            "source-ip": [{ "cidr": "10.0.0.0/8" }]
        }
    });
    check(json!([
        [numeric, ruler_event(), true],
        [numeric, ruler_event_with("c-count", json!(6)), false],
        [numeric, ruler_event_with("d-count", json!(10)), false],
        [numeric, ruler_event_with("x-limit", json!("301.8")), false],
        [ip, ruler_event(), true],
        [ip, ruler_event_with("source-ip", json!("10.0.1.33")), false],
        [complex, ruler_event(), true],
        [
            complex,
            ruler_event_with("source-ip", json!("192.168.0.1")),
            false
        ],
        [
            complex,
            ruler_event_with("state", json!("initializing")),
            false
        ]
    ]));
}

// README, "Exists matching", with its note that `exists: false` also matches an event in which
// `c-count` is an object rather than a leaf.
#[test]
fn ruler_exists() {
    let exists = json!({ "detail": { "c-count": [{ "exists": true }] } });
    let absent = json!({ "detail": { "c-count": [{ "exists": false }] } });
    let object = ruler_event_with("c-count", json!({ "c1": 100 }));
    let mut missing = ruler_event();
    if let Some(detail) = missing["detail"].as_object_mut() {
        detail.remove("c-count");
    }
    check(json!([
        [exists, ruler_event(), true],
        [exists, missing, false],
        [exists, object, false],
        [absent, ruler_event(), false],
        [absent, missing, true],
        [absent, object, true]
    ]));
}

// README, "Rule examples with "$or" Primitive": normal "Or" and parallel "Or".
#[test]
fn ruler_or_and_parallel_or() {
    let or = json!({
        "source": ["aws.cloudwatch"],
        "$or": [
            { "metricName": ["CPUUtilization", "ReadLatency"] },
            { "namespace": ["AWS/EC2", "AWS/ES"] }
        ]
    });
    let parallel = json!({
        "$or": [
            { "metricName": ["CPUUtilization", "ReadLatency"] },
            { "namespace": ["AWS/EC2", "AWS/ES"] }
        ],
        "detail": {
            "$or": [
                { "source": ["aws.cloudwatch"] },
                { "detail-type": ["CloudWatch Alarm State Change"] }
            ]
        }
    });
    check(json!([
        [or, { "source": "aws.cloudwatch", "metricName": "ReadLatency" }, true],
        [or, { "source": "aws.cloudwatch", "namespace": "AWS/ES" }, true],
        [or, { "source": "aws.cloudwatch", "metricName": "Other" }, false],
        [or, { "source": "aws.ec2", "metricName": "CPUUtilization" }, false],
        [parallel, { "namespace": "AWS/EC2", "detail": { "detail-type": "CloudWatch Alarm State Change" } }, true],
        [parallel, { "metricName": "ReadLatency", "detail": { "source": "aws.cloudwatch" } }, true],
        [parallel, { "metricName": "CPUUtilization", "detail": { "source": "aws.ec2" } }, false],
        [parallel, { "scope": "x", "detail": { "source": "aws.cloudwatch" } }, false]
    ]));
}

// README, "Rule examples with "$or" Primitive": "Or" with an "And" inside, and nested "Or" and
// "And".
#[test]
fn ruler_or_with_and_inside_and_nested() {
    let with_and = json!({
        "source": ["aws.cloudwatch"],
        "$or": [
            { "metricName": ["CPUUtilization", "ReadLatency"] },
            { "metricType": ["MetricType"], "namespace": ["AWS/EC2", "AWS/ES"] },
            { "scope": ["Service"] }
        ]
    });
    let nested = json!({
        "source": ["aws.cloudwatch"],
        "$or": [
            { "metricName": ["CPUUtilization", "ReadLatency"] },
            {
                "metricType": ["MetricType"],
                "namespace": ["AWS/EC2", "AWS/ES"],
                "$or": [{ "metricId": [1234] }, { "spaceId": [1000] }]
            },
            { "scope": ["Service"] }
        ]
    });
    let cw = "aws.cloudwatch";
    check(json!([
        [with_and, { "source": cw, "metricType": "MetricType", "namespace": "AWS/ES" }, true],
        [with_and, { "source": cw, "metricType": "MetricType" }, false],
        [with_and, { "source": cw, "scope": "Service" }, true],
        [nested, { "source": cw, "metricType": "MetricType", "namespace": "AWS/EC2", "spaceId": 1000 }, true],
        [nested, { "source": cw, "metricType": "MetricType", "namespace": "AWS/EC2" }, false],
        [nested, { "source": cw, "metricType": "MetricType", "namespace": "AWS/EC2", "metricId": "1234" }, false],
        [nested, { "source": cw, "metricName": "ReadLatency" }, true]
    ]));
}

// README, "JSON Array Matching": arrays of objects, multi-level arrays, and array consistency
// (rulesForJSONEvent, which EventBridge follows, does not match the "Anna"/"Jones" rule).
#[test]
fn ruler_json_array_matching() {
    let flat = json!({
        "employees": [
            { "firstName": "John", "lastName": "Doe" },
            { "firstName": "Anna", "lastName": "Smith" },
            { "firstName": "Peter", "lastName": "Jones" }
        ]
    });
    let nested = json!({
        "employees": [
            [
                { "firstName": "John", "lastName": "Doe" },
                { "firstName": "Anna", "lastName": "Smith" }
            ],
            [{ "firstName": "Peter", "lastName": "Jones" }]
        ]
    });
    let anna = json!({ "employees": { "firstName": ["Anna"] } });
    let anna_jones = json!({ "employees": { "firstName": ["Anna"], "lastName": ["Jones"] } });
    check(json!([
        [anna, flat, true],
        [anna, nested, true],
        [anna_jones, flat, false],
        [anna_jones, nested, false]
    ]));
}

// The rules event-ruler's own tests try on an event with nested arrays of objects
// (src/test/software/amazon/event/ruler/RulerTest.java,
// WHEN_JSONContainsArrays_THEN_RulerNoCompileMatchesWork): `exists: false` applies within the
// array element the other fields matched in. The last two rules are ours.
#[test]
fn ruler_complex_arrays() {
    let event = json!({
        "employees": [
            [
                { "firstName": "John", "lastName": "Doe", "ids": [1234, 1000, 9999] },
                { "firstName": "Anna", "lastName": "Smith" }
            ],
            [{ "firstName": "Peter", "lastName": "Jones", "ids": [] }]
        ]
    });
    check(json!([
        [{ "employees": { "firstName": ["Anna"] } }, event, true],
        [{ "employees": { "firstName": ["John"], "ids": [1000] } }, event, true],
        [{ "employees": { "firstName": ["Anna"], "ids": [{ "exists": false }] } }, event, true],
        [{ "employees": { "firstName": ["Alice"] } }, event, false],
        [{ "employees": { "firstName": ["Anna"], "lastName": ["Jones"] } }, event, false],
        [{ "employees": { "firstName": ["Alice"], "lastName": ["Bob"] } }, event, false],
        [{ "a": ["b"] }, event, false],
        [{ "employees": ["b"] }, event, false],
        [{ "employees": { "firstName": ["Anna"], "ids": [1000] } }, event, false],
        [{ "employees": { "firstName": ["Anna"], "ids": [{ "exists": true }] } }, event, false],
        // Peter's `ids` is an empty array: it holds no leaf value, so it does not exist.
        [{ "employees": { "firstName": ["Peter"], "ids": [{ "exists": false }] } }, event, true],
        // With no other field to pin an element, John's `ids` makes the field exist.
        [{ "employees": { "ids": [{ "exists": false }] } }, event, false]
    ]));
}

// ---------------------------------------------------------------------------------------------
// Cases LocalStack recorded against AWS: localstack/localstack,
// tests/aws/services/events/event_pattern_templates/<name>.json5 (`_NEG`: no match).
// ---------------------------------------------------------------------------------------------

#[test]
fn aws_recorded_cases() {
    let homemade = json!({
        "dynamodb": { "NewImage": { "homemade": { "S": [{ "anything-but": ["roses"] }, { "exists": false }] } } }
    });
    let n_filter = json!({
        "dynamodb": { "NewImage": { "numericFilter": { "N": [{ "numeric": [">", 100] }, { "anything-but": "101" }] } } }
    });
    let emoji = "A CamelCase string with an emoji 🚀 and trailing whitespace ";
    check(json!([
        // content_anything_but_string_null, _string_list_null, _string_missing_NEG
        [{ "d": { "s": [{ "anything-but": "initializing" }] } }, { "d": { "s": null } }, true],
        [{ "d": { "s": [{ "anything-but": ["stopped", "running"] }] } }, { "d": { "s": null } }, true],
        [{ "d": { "s": [{ "anything-but": "initializing" }] } }, { "d": {} }, false],
        // content_anything_prefix_int_value, content_anything_suffix_null
        [{ "d": { "s": [{ "anything-but": { "prefix": "init" } }] } }, { "d": { "s": 12 } }, true],
        [{ "d": { "f": [{ "anything-but": { "suffix": ".txt" } }] } }, { "d": { "f": null } }, true],
        // content_anything_wildcard_int, content_anything_wildcard_empty
        [{ "d": { "f": [{ "anything-but": { "wildcard": "*/dir/*" } }] } }, { "d": { "f": 123 } }, true],
        [{ "d": { "f": [{ "anything-but": { "wildcard": "" } }] } }, { "d": { "f": "dir/init/file" } }, true],
        // content_anything_but_ignorecase_null, content_anything_but_number_zero
        [{ "d": { "s": [{ "anything-but": { "equals-ignore-case": "init" } }] } }, { "d": { "s": null } }, true],
        [{ "d": { "x": [{ "anything-but": 0 }] } }, { "d": { "x": 789 } }, true]
    ]));
    check(json!([
        // content_wildcard_empty_NEG, content_wildcard_simplified, content_wildcard_repeating(_NEG)
        [{ "arn": [{ "wildcard": "" }] }, { "arn": "arn:aws:events" }, false],
        [{ "arn": [{ "wildcard": "arn:aws:events:us-east-1:*:event-bus/*" }] },
         { "arn": "arn:aws:events:us-east-1:123456789012:event-bus/myEventBus" }, true],
        [{ "f": [{ "wildcard": "/Users/*/dir/dir/dir/dir/dir/doc.txt" }] },
         { "f": "/Users/ls_user/dir/dir/dir/dir/dir/doc.txt" }, true],
        [{ "f": [{ "wildcard": "/Users/*/dir/dir/dir/dir/dir/doc.txt" }] },
         { "f": "/Users/ls_user/dir/dir/dir/dir/otherdir/doc.txt" }, false],
        // content_prefix_empty, content_suffix_empty, content_ignorecase_empty(_NEG)
        [{ "source": [{ "prefix": "" }] }, { "source": "test-source" }, true],
        [{ "source": [{ "suffix": "" }] }, { "source": "test-source" }, true],
        [{ "v": [{ "equals-ignore-case": "" }] }, { "v": "" }, true],
        [{ "v": [{ "equals-ignore-case": "" }] }, { "v": "test-value" }, false],
        // content_ip_address_v6(_NEG), content_ip_address_bad_type_NEG
        [{ "ip": [{ "cidr": "2001:db8:1234:1a00::/64" }] }, { "ip": "2001:0db8:1234:1a00:0000:0000:0000:0000" }, true],
        [{ "ip": [{ "cidr": "2001:db8:1234:1a00::/64" }] }, { "ip": "2001:0db8:123f:1a01:0000:0000:0000:0000" }, false],
        [{ "ip": [{ "cidr": "10.0.0.0/24" }] }, { "ip": 123 }, false],
        // number_comparison_float, numeric-int-float, numeric-null_NEG, numeric-string_NEG
        [{ "number": [300] }, { "number": 300.0 }, true],
        [{ "number": [{ "numeric": [">", 100] }] }, { "number": 101.0 }, true],
        [{ "number": [{ "numeric": [">", 100] }] }, { "number": null }, false],
        [{ "number": [{ "numeric": [">", 100] }] }, { "number": "300" }, false]
    ]));
    check(json!([
        // exists_list_empty_NEG, arrays_empty_null_NEG, list_within_dict
        [{ "resources": [{ "exists": true }] }, { "resources": [] }, false],
        [{ "resources": [null] }, { "resources": [] }, false],
        [{ "d": { "automations": { "id": [{ "exists": true }] } } },
         { "d": { "automations": [{ "key1": "value1" }, { "id": "match" }, { "key2": "value2" }] } }, true],
        // exists_dynamodb(_NEG): exists only sees leaf values
        [{ "db": { "presentKey": { "S": [{ "exists": true }] } } }, { "db": { "presentKey": { "S": "x" } } }, true],
        [{ "db": { "presentKey": [{ "exists": true }] } }, { "db": { "presentKey": { "S": "x" } } }, false],
        // or-anything-but, or-exists, or-exists-parent
        [homemade, { "dynamodb": { "NewImage": { "homemade": { "S": "ABCD", "N": "1234" } } } }, true],
        [homemade, { "dynamodb": { "NewImage": { "homemade": { "N": "789" } } } }, true],
        [homemade, { "dynamodb": { "NewImage": { "purchased": { "N": "789" } } } }, true],
        // or-numeric-anything-but(_NEG): "42" is a string, which only anything-but can match
        [n_filter, { "dynamodb": { "NewImage": { "numericFilter": { "N": "42" } } } }, true],
        [n_filter, { "dynamodb": { "NewImage": { "numericFilter": { "N": "101" } } } }, false],
        // nested_json_NEG, key_case_sensitive_NEG, boolean(_NEG), operator_multiple_list
        [{ "detail": { "my-key": ["my-value"] } }, { "detail": "{\"my-key\": \"my-value\"}" }, false],
        [{ "MY_KEY": ["my-value"] }, { "my_key": "my-value" }, false],
        [{ "boolean": [false] }, { "boolean": false }, true],
        [{ "boolean": [false] }, { "boolean": true }, false],
        [{ "k": [{ "exists": true }, { "prefix": "IGNORED" }, { "suffix": "IGNORED" }] }, { "k": "v" }, true],
        // string: exact, without any normalisation
        [{ "string": [emoji] }, { "string": emoji }, true],
        [{ "string": [emoji] }, { "string": emoji.trim_end() }, false]
    ]));
}

// ---------------------------------------------------------------------------------------------
// Semantics, one at a time.
// ---------------------------------------------------------------------------------------------

#[test]
fn numbers_strings_booleans_and_null_are_distinct() {
    check(json!([
        [{ "n": [300] }, { "n": 300 }, true],
        [{ "n": [300] }, { "n": 300.0 }, true],
        [{ "n": [3.0e2] }, { "n": 300 }, true],
        [{ "n": [300] }, { "n": 301 }, false],
        [{ "n": [300] }, { "n": "300" }, false],
        [{ "n": ["300"] }, { "n": 300 }, false],
        [{ "n": ["300"] }, { "n": "300" }, true],
        [{ "n": [-1.5] }, { "n": -1.5 }, true],
        [{ "n": [{ "prefix": "30" }] }, { "n": 300 }, false],
        [{ "n": [{ "numeric": [">", 1] }] }, { "n": "300" }, false],
        [{ "b": [true] }, { "b": true }, true],
        [{ "b": [true] }, { "b": "true" }, false],
        [{ "b": ["true"] }, { "b": true }, false],
        [{ "b": [true] }, { "b": 1 }, false],
        [{ "x": [null] }, {}, false],
        [{ "x": [null] }, { "x": false }, false]
    ]));
}

#[test]
fn large_integers_compare_exactly() {
    // Both round to the same f64, yet are different account numbers.
    let (a, b) = (123_456_789_012_345_678_u64, 123_456_789_012_345_679_u64);
    check(json!([
        [{ "account": [a] }, { "account": a }, true],
        [{ "account": [a] }, { "account": b }, false],
        [{ "big": [u64::MAX] }, { "big": u64::MAX }, true],
        [{ "neg": [i64::MIN] }, { "neg": i64::MIN }, true]
    ]));
}

#[test]
fn missing_fields_and_missing_parents() {
    let nested = json!({ "a": { "b": ["c"] } });
    let b_absent = json!({ "a": { "b": [{ "exists": false }] } });
    check(json!([
        [nested, { "a": { "b": "c" } }, true],
        [nested, {}, false],
        [nested, { "a": {} }, false],
        [nested, { "a": "c" }, false],
        [nested, { "a": { "b": { "c": "c" } } }, false],
        // A pattern object matches no leaf, nor an array of leaves.
        [nested, { "a": ["c"] }, false],
        [b_absent, {}, true],
        [b_absent, { "a": 5 }, true],
        [b_absent, { "a": { "b": { "deeper": 1 } } }, true],
        [b_absent, { "a": { "b": 1 } }, false],
        // An event that is not an object has no fields.
        [{ "a": ["x"] }, "x", false]
    ]));
}

#[test]
fn arrays_in_the_event() {
    check(json!([
        [{ "tags": ["b"] }, { "tags": ["a", "b"] }, true],
        [{ "tags": ["c", "a"] }, { "tags": ["a", "b"] }, true],
        [{ "tags": ["c"] }, { "tags": ["a", "b"] }, false],
        [{ "tags": ["b"] }, { "tags": [["a"], ["b"]] }, true],
        [{ "tags": ["b"] }, { "tags": [] }, false],
        [{ "n": [{ "numeric": [">", 10] }] }, { "n": [1, 20] }, true],
        [{ "n": [{ "numeric": [">", 10] }] }, { "n": [1, 2] }, false],
        [{ "s": [{ "prefix": "x" }] }, { "s": [1, "xy"] }, true],
        // Leaves beside objects in one array count for a value, the objects for an object.
        [{ "s": ["x"] }, { "s": [{ "t": "x" }, "x"] }, true],
        [{ "s": { "t": ["x"] } }, { "s": [{ "t": "x" }, "x"] }, true]
    ]));
}

#[test]
fn object_patterns_over_arrays_keep_each_element_together() {
    let cheap_book = json!({ "items": { "kind": ["book"], "price": [{ "numeric": ["<", 10] }] } });
    check(json!([
        [cheap_book, { "items": [{ "kind": "book", "price": 5 }] }, true],
        [cheap_book, { "items": [{ "kind": "pen", "price": 5 }, { "kind": "book", "price": 5 }] }, true],
        [cheap_book, { "items": [{ "kind": "book", "price": 50 }, { "kind": "pen", "price": 5 }] }, false],
        [cheap_book, { "items": [[{ "kind": "book", "price": 5 }]] }, true],
        [cheap_book, { "items": [] }, false],
        // Separate arrays need not share an element index.
        [{ "a": { "x": [1] }, "b": { "y": [2] } }, { "a": [{ "x": 0 }, { "x": 1 }], "b": [{ "y": 2 }] }, true]
    ]));
}

#[test]
fn exists_false_in_arrays_of_objects() {
    let no_discount = json!({ "items": { "discount": [{ "exists": false }] } });
    let full_price_book =
        json!({ "items": { "kind": ["book"], "discount": [{ "exists": false }] } });
    check(json!([
        [no_discount, { "items": [{ "kind": "book" }, { "kind": "pen" }] }, true],
        [no_discount, { "items": [{ "kind": "book" }, { "discount": 5 }] }, false],
        [no_discount, { "items": [] }, true],
        [no_discount, { "items": [{ "discount": [] }] }, true],
        [full_price_book, { "items": [{ "kind": "book", "discount": 5 }, { "kind": "book" }] }, true],
        [full_price_book, { "items": [{ "kind": "book", "discount": 5 }, { "kind": "pen" }] }, false]
    ]));
}

#[test]
fn exists_sees_leaf_values_only() {
    let leaves = json!([{ "x": "" }, { "x": null }, { "x": false }, { "x": 0 }, { "x": [null] }]);
    let no_leaves = json!([
        {}, { "x": {} }, { "x": { "y": 1 } }, { "x": [] }, { "x": [[], {}] }, { "x": [{ "y": 1 }] }
    ]);
    let exists = json!({ "x": [{ "exists": true }] });
    let absent = json!({ "x": [{ "exists": false }] });
    let either = json!({ "x": [{ "exists": true }, { "exists": false }] });
    for (events, leaf) in [(leaves, true), (no_leaves, false)] {
        for event in events.as_array().into_iter().flatten() {
            check(json!([
                [exists, event, leaf],
                [absent, event, !leaf],
                [either, event, true]
            ]));
        }
    }
}

#[test]
fn anything_but_on_other_types_arrays_and_missing_fields() {
    let not_a = json!({ "x": [{ "anything-but": "a" }] });
    let not_1_2 = json!({ "x": [{ "anything-but": [1, 2] }] });
    let not_prefix = json!({ "x": [{ "anything-but": { "prefix": "a" } }] });
    let not_gold = json!({ "tier": [{ "anything-but": ["gold", "silver"] }, { "exists": false }] });
    check(json!([
        // A value of another type is never excluded.
        [not_a, { "x": 1 }, true],
        [not_a, { "x": true }, true],
        [not_a, { "x": null }, true],
        [not_1_2, { "x": "1" }, true],
        [not_1_2, { "x": 1.0 }, false],
        [not_1_2, { "x": 3 }, true],
        [not_prefix, { "x": 10 }, true],
        [not_prefix, { "x": "abc" }, false],
        // On an array: matches when any element is not excluded.
        [not_a, { "x": ["a", "b"] }, true],
        [not_a, { "x": ["a"] }, false],
        [not_a, { "x": ["a", ["a"]] }, false],
        [{ "x": [{ "anything-but": ["a", "b"] }] }, { "x": ["a", "b"] }, false],
        // Never a missing field, an object or an empty array...
        [not_a, {}, false],
        [not_a, { "x": { "y": "b" } }, false],
        [not_a, { "x": [] }, false],
        // ...unless `exists: false` says so.
        [not_gold, {}, true],
        [not_gold, { "tier": "bronze" }, true],
        [not_gold, { "tier": "gold" }, false],
        [not_gold, { "tier": ["gold", "bronze"] }, true]
    ]));
}

#[test]
fn prefix_suffix_and_equals_ignore_case() {
    let any_case = json!({ "s": [{ "equals-ignore-case": "Été Ünïcode" }] });
    check(json!([
        [{ "s": [{ "prefix": "ab" }] }, { "s": "abc" }, true],
        [{ "s": [{ "prefix": "ab" }] }, { "s": "ab" }, true],
        [{ "s": [{ "prefix": "ab" }] }, { "s": "a" }, false],
        [{ "s": [{ "prefix": "ab" }] }, { "s": "Abc" }, false],
        [{ "s": [{ "suffix": "bc" }] }, { "s": "abc" }, true],
        [{ "s": [{ "suffix": "bc" }] }, { "s": "aBC" }, false],
        [{ "s": [{ "suffix": "é" }] }, { "s": "café" }, true],
        [{ "s": [{ "prefix": { "equals-ignore-case": "ÄB" } }] }, { "s": "äbc" }, true],
        [{ "s": [{ "prefix": { "equals-ignore-case": "ab" } }] }, { "s": "A" }, false],
        [{ "s": [{ "prefix": { "equals-ignore-case": "" } }] }, { "s": "" }, true],
        [{ "s": [{ "suffix": { "equals-ignore-case": "ÜBER" } }] }, { "s": "Xüber" }, true],
        [{ "s": [{ "suffix": { "equals-ignore-case": "ber" } }] }, { "s": "BE" }, false],
        [{ "s": [{ "suffix": { "equals-ignore-case": "LÉ" } }] }, { "s": "clé" }, true],
        [any_case, { "s": "été ünïcode" }, true],
        [any_case, { "s": "ÉTÉ ÜNÏCODE" }, true],
        [any_case, { "s": "ete unicode" }, false],
        [any_case, { "s": "été ünïcode!" }, false],
        [any_case, { "s": 1 }, false],
        [{ "s": [{ "equals-ignore-case": "abc" }] }, { "s": "ABC" }, true]
    ]));
}

#[test]
fn wildcards() {
    // In the Rust strings below, `\\` is one backslash.
    check(json!([
        [{ "s": [{ "wildcard": "*" }] }, { "s": "" }, true],
        [{ "s": [{ "wildcard": "*" }] }, { "s": "anything" }, true],
        [{ "s": [{ "wildcard": "" }] }, { "s": "" }, true],
        [{ "s": [{ "wildcard": "" }] }, { "s": "x" }, false],
        [{ "s": [{ "wildcard": "a*" }] }, { "s": "a" }, true],
        [{ "s": [{ "wildcard": "*a" }] }, { "s": "ba" }, true],
        [{ "s": [{ "wildcard": "*a" }] }, { "s": "ab" }, false],
        [{ "s": [{ "wildcard": "a*b*c" }] }, { "s": "abc" }, true],
        [{ "s": [{ "wildcard": "a*b*c" }] }, { "s": "aXbYc" }, true],
        [{ "s": [{ "wildcard": "a*b*c" }] }, { "s": "acb" }, false],
        [{ "s": [{ "wildcard": "ab*ba" }] }, { "s": "aba" }, false],
        [{ "s": [{ "wildcard": "ab*ba" }] }, { "s": "abba" }, true],
        [{ "s": [{ "wildcard": "a*a*a" }] }, { "s": "aaa" }, true],
        [{ "s": [{ "wildcard": "a*a*a" }] }, { "s": "aa" }, false],
        [{ "s": [{ "wildcard": "*.png" }] }, { "s": ".png" }, true],
        [{ "s": [{ "wildcard": "é*ü" }] }, { "s": "éaü" }, true],
        [{ "s": [{ "wildcard": "a\\*b" }] }, { "s": "a*b" }, true],
        [{ "s": [{ "wildcard": "a\\*b" }] }, { "s": "axb" }, false],
        [{ "s": [{ "wildcard": "a\\\\b" }] }, { "s": "a\\b" }, true],
        [{ "s": [{ "wildcard": "a\\\\*" }] }, { "s": "a\\bc" }, true],
        [{ "s": [{ "wildcard": "\\**" }] }, { "s": "*x" }, true],
        [{ "s": [{ "wildcard": "\\**" }] }, { "s": "x*" }, false],
        [{ "s": [{ "wildcard": "*" }] }, { "s": 1 }, false],
        [{ "s": [{ "wildcard": "*" }] }, { "s": null }, false]
    ]));
}

#[test]
fn numeric_bounds() {
    let range = json!({ "n": [{ "numeric": [">", 0, "<=", 5] }] });
    let half_open = json!({ "n": [{ "numeric": [">=", 0, "<", 5] }] });
    check(json!([
        [range, { "n": 0 }, false],
        [range, { "n": 0.000_001 }, true],
        [range, { "n": 5 }, true],
        [range, { "n": 5.000_001 }, false],
        [half_open, { "n": 0 }, true],
        [half_open, { "n": -0.0 }, true],
        [half_open, { "n": 5 }, false],
        [{ "n": [{ "numeric": ["<", -1] }] }, { "n": -2 }, true],
        [{ "n": [{ "numeric": ["<", -1] }] }, { "n": -1 }, false],
        [{ "n": [{ "numeric": ["<=", -1] }] }, { "n": -1 }, true],
        [{ "n": [{ "numeric": [">=", 1e9] }] }, { "n": 1_000_000_000_u64 }, true],
        [{ "n": [{ "numeric": ["=", 0.5] }] }, { "n": 0.5 }, true],
        [{ "n": [{ "numeric": ["=", 5] }] }, { "n": 5.0 }, true],
        [{ "n": [{ "numeric": ["=", 5] }] }, { "n": true }, false]
    ]));
}

#[test]
fn cidr_blocks() {
    check(json!([
        [{ "ip": [{ "cidr": "10.0.0.77/24" }] }, { "ip": "10.0.0.1" }, true],
        [{ "ip": [{ "cidr": "10.0.0.0/8" }] }, { "ip": "10.255.255.255" }, true],
        [{ "ip": [{ "cidr": "10.0.0.0/8" }] }, { "ip": "11.0.0.0" }, false],
        [{ "ip": [{ "cidr": "10.0.0.1/32" }] }, { "ip": "10.0.0.1" }, true],
        [{ "ip": [{ "cidr": "10.0.0.1/32" }] }, { "ip": "10.0.0.2" }, false],
        [{ "ip": [{ "cidr": "0.0.0.0/0" }] }, { "ip": "203.0.113.9" }, true],
        [{ "ip": [{ "cidr": "0.0.0.0/0" }] }, { "ip": "::1" }, false],
        [{ "ip": [{ "cidr": "2001:db8::/32" }] }, { "ip": "2001:db8:ffff::1" }, true],
        [{ "ip": [{ "cidr": "2001:db8::/32" }] }, { "ip": "2001:db9::1" }, false],
        [{ "ip": [{ "cidr": "::/0" }] }, { "ip": "10.0.0.1" }, false],
        [{ "ip": [{ "cidr": "10.0.0.0/8" }] }, { "ip": "10.0.0.1.5" }, false],
        [{ "ip": [{ "cidr": "10.0.0.0/8" }] }, { "ip": "not an address" }, false],
        [{ "ip": [{ "cidr": "10.0.0.0/8" }] }, { "ip": ["192.168.0.1", "10.1.1.1"] }, true]
    ]));
}

#[test]
fn or_combines_with_sibling_fields() {
    let pattern = json!({ "a": ["1"], "$or": [{ "b": ["2"] }, { "c": ["3"] }] });
    let maybe_missing = json!({ "$or": [{ "a": [{ "exists": false }] }, { "a": ["x"] }] });
    let in_items = json!({ "items": { "$or": [{ "k": ["a"] }, { "v": [1] }] } });
    check(json!([
        [pattern, { "a": "1", "c": "3" }, true],
        [pattern, { "a": "1", "b": "2", "c": "4" }, true],
        [pattern, { "a": "1" }, false],
        [pattern, { "b": "2", "c": "3" }, false],
        [maybe_missing, {}, true],
        [maybe_missing, { "a": "x" }, true],
        [maybe_missing, { "a": "y" }, false],
        [in_items, { "items": [{ "k": "b", "v": 2 }, { "k": "b", "v": 1 }] }, true],
        [in_items, { "items": [{ "k": "b", "v": 2 }] }, false]
    ]));
}

#[test]
fn operator_names_are_plain_fields_outside_or() {
    check(json!([
        [{ "prefix": ["x"] }, { "prefix": "x" }, true],
        [{ "detail": { "numeric": [1] } }, { "detail": { "numeric": 1 } }, true],
        [{ "detail": { "numeric": [1] } }, { "detail": { "numeric": 2 } }, false]
    ]));
}

#[test]
fn one_pattern_matches_many_events() {
    let pattern = compile(&json!({ "id": [{ "prefix": "meeting-" }], "data": { "n": [1, 2] } }));
    let event = |id: &str, n: i64| json!({ "id": id, "data": { "n": n } });
    assert!(pattern.matches(&event("meeting-created", 1)));
    assert!(pattern.matches(&event("meeting-ended", 2)));
    assert!(!pattern.matches(&event("user-joined", 1)));
    assert!(!pattern.matches(&event("meeting-created", 3)));
}

// ---------------------------------------------------------------------------------------------
// Invalid patterns, and where their errors point. Names in comments are LocalStack's
// AWS-recorded `_EXC` cases (see above).
// ---------------------------------------------------------------------------------------------

#[test]
fn error_display() {
    let e = PatternError {
        path: "data.id[1].prefix".into(),
        message: "must be a string".into(),
    };
    assert_eq!(e.to_string(), "`data.id[1].prefix`: must be a string");
    let e = Pattern::compile(&json!({ "data": { "id": ["x", { "prefx": "a" }] } })).err();
    let e = e.expect("an unknown operator is rejected");
    assert_eq!(e.path, "data.id[1].prefx");
    assert_eq!(
        e.to_string(),
        "`data.id[1].prefx`: unknown operator `prefx`"
    );
}

#[test]
fn rejects_malformed_structure() {
    rejects(json!([
        [["not", "an", "object"], ""],
        ["text", ""],
        [{}, ""],
        // int_nolist_EXC, string_nolist_EXC: a value outside an array
        [{ "int": 42 }, "int"],
        [{ "string": "my-value" }, "string"],
        [{ "a": { "b": null } }, "a.b"],
        [{ "time": { "prefix": "2017" } }, "time.prefix"],
        // arrays_empty_EXC
        [{ "resources": [] }, "resources"],
        [{ "a": { "b": {} } }, "a.b"],
        [{ "a": [["nested"]] }, "a[0]"],
        [{ "a": ["x", {}] }, "a[1]"],
        [{ "a": [{ "prefix": "x", "suffix": "y" }] }, "a[0]"]
    ]));
}

#[test]
fn rejects_unknown_operators() {
    rejects(json!([
        [{ "data": { "id": ["x", { "prefx": "a" }] } }, "data.id[1].prefx"],
        // operator_case_sensitive_EXC, content_numeric_operatorcasing_EXC
        [{ "my_key": [{ "EXISTS": true }] }, "my_key[0].EXISTS"],
        [{ "equal": [{ "NUMERIC": ["=", 5] }] }, "equal[0].NUMERIC"],
        [{ "a": [{ "exactly": "x" }] }, "a[0].exactly"]
    ]));
}

#[test]
fn rejects_bad_string_operands() {
    rejects(json!([
        [{ "data": { "id": ["x", { "prefix": 5 }] } }, "data.id[1].prefix"],
        // content_prefix_int_EXC, content_prefix_list_EXC, content_suffix_int_EXC, _list_EXC
        [{ "time": [{ "prefix": 123 }] }, "time[0].prefix"],
        [{ "time": [{ "prefix": ["2022-07-13"] }] }, "time[0].prefix"],
        [{ "f": [{ "suffix": 123 }] }, "f[0].suffix"],
        [{ "f": [{ "suffix": [".png"] }] }, "f[0].suffix"],
        [{ "a": [{ "prefix": { "equals-ignore-case": 1 } }] }, "a[0].prefix"],
        [{ "a": [{ "prefix": { "wildcard": "x" } }] }, "a[0].prefix"],
        [{ "a": [{ "suffix": { "equals-ignore-case": "x", "prefix": "y" } }] }, "a[0].suffix"],
        // content_ignorecase_EXC, content_ignorecase_list_EXC
        [{ "d": [{ "equals-ignore-case": ["ec2"] }] }, "d[0].equals-ignore-case"],
        [{ "d": [{ "equals-ignore-case": { "prefix": "ec2" } }] }, "d[0].equals-ignore-case"],
        // content_wildcard_int_EXC, content_wildcard_list_EXC, content_wildcard_repeating_star_EXC
        [{ "w": [{ "wildcard": 123 }] }, "w[0].wildcard"],
        [{ "w": [{ "wildcard": ["a*"] }] }, "w[0].wildcard"],
        [{ "w": [{ "wildcard": "arn:aws:events:us-east-1:**:event-bus/*" }] }, "w[0].wildcard"],
        [{ "w": [{ "wildcard": "a\\b" }] }, "w[0].wildcard"],
        [{ "w": [{ "wildcard": "trailing\\" }] }, "w[0].wildcard"]
    ]));
}

#[test]
fn rejects_bad_numeric_and_exists() {
    rejects(json!([
        // content_numeric_number_EXC, content_numeric_EXC, content_numeric_syntax_EXC
        [{ "c": [{ "numeric": 10 }] }, "c[0].numeric"],
        [{ "c": [{ "numeric": [">", 0, ">", 0] }] }, "c[0].numeric[2]"],
        [{ "c": [{ "numeric": [">", 0, "<"] }] }, "c[0].numeric[3]"],
        [{ "c": [{ "numeric": [] }] }, "c[0].numeric[0]"],
        [{ "c": [{ "numeric": ["!=", 1] }] }, "c[0].numeric[0]"],
        [{ "c": [{ "numeric": [5, ">"] }] }, "c[0].numeric[0]"],
        [{ "c": [{ "numeric": [">", "1"] }] }, "c[0].numeric[1]"],
        [{ "c": [{ "numeric": ["="] }] }, "c[0].numeric[1]"],
        [{ "c": [{ "numeric": ["=", 1, 2] }] }, "c[0].numeric"],
        [{ "c": [{ "numeric": ["<", 1, ">", 0] }] }, "c[0].numeric"],
        [{ "c": [{ "numeric": [">", 0, "<", 5, 6] }] }, "c[0].numeric"],
        [{ "c": [{ "numeric": [">", 5, "<", 1] }] }, "c[0].numeric"],
        [{ "c": [{ "numeric": [">=", 5, "<=", 5] }] }, "c[0].numeric"],
        [{ "a": [{ "exists": "true" }] }, "a[0].exists"],
        [{ "a": [{ "exists": 1 }] }, "a[0].exists"],
        [{ "a": [{ "exists": null }] }, "a[0].exists"]
    ]));
}

#[test]
fn rejects_bad_anything_but() {
    rejects(json!([
        // content_anything_but_string_null_type_EXC, _string_list_null_type_EXC
        [{ "s": [{ "anything-but": null }] }, "s[0].anything-but"],
        [{ "s": [{ "anything-but": ["stopped", null] }] }, "s[0].anything-but"],
        [{ "s": [{ "anything-but": true }] }, "s[0].anything-but"],
        [{ "s": [{ "anything-but": [] }] }, "s[0].anything-but"],
        [{ "s": [{ "anything-but": ["a", 1] }] }, "s[0].anything-but"],
        [{ "s": [{ "anything-but": [["a"]] }] }, "s[0].anything-but"],
        [{ "s": [{ "anything-but": { "prefix": "a", "suffix": "b" } }] }, "s[0].anything-but"],
        // content_anything_prefix_empty_EXC, content_anything_suffix_empty_EXC
        [{ "f": [{ "anything-but": { "prefix": "" } }] }, "f[0].anything-but.prefix"],
        [{ "f": [{ "anything-but": { "suffix": "" } }] }, "f[0].anything-but.suffix"],
        [{ "f": [{ "anything-but": { "suffix": ["a", ""] } }] }, "f[0].anything-but.suffix[1]"],
        // content_anything_prefix_int_EXC, _prefix_list_type_EXC, _suffix_list_null_type_EXC
        [{ "s": [{ "anything-but": { "prefix": 123 } }] }, "s[0].anything-but.prefix"],
        [{ "s": [{ "anything-but": { "prefix": [123, "test"] } }] }, "s[0].anything-but.prefix[0]"],
        [{ "f": [{ "anything-but": { "suffix": [null, ".txt"] } }] }, "f[0].anything-but.suffix[0]"],
        [{ "s": [{ "anything-but": { "prefix": [] } }] }, "s[0].anything-but.prefix"],
        // content_anything_prefix_ignorecase_EXC, content_anything_suffix_ignorecase_EXC
        [{ "f": [{ "anything-but": { "prefix": { "equals-ignore-case": "f" } } }] }, "f[0].anything-but.prefix"],
        [{ "f": [{ "anything-but": { "suffix": { "equals-ignore-case": "f" } } }] }, "f[0].anything-but.suffix"],
        // content_anything_but_ignorecase_EXC, _ignorecase_list_EXC
        [{ "s": [{ "anything-but": { "equals-ignore-case": 123 } }] }, "s[0].anything-but.equals-ignore-case"],
        [{ "s": [{ "anything-but": { "equals-ignore-case": [1, 2] } }] }, "s[0].anything-but.equals-ignore-case[0]"],
        // content_anything_wildcard_type_EXC, _wildcard_list_type_EXC
        [{ "f": [{ "anything-but": { "wildcard": 123 } }] }, "f[0].anything-but.wildcard"],
        [{ "s": [{ "anything-but": { "wildcard": [123, "*/dir/*"] } }] }, "s[0].anything-but.wildcard[0]"],
        [{ "s": [{ "anything-but": { "wildcard": "a**" } }] }, "s[0].anything-but.wildcard"],
        [{ "s": [{ "anything-but": { "numeric": [">", 1] } }] }, "s[0].anything-but.numeric"],
        [{ "s": [{ "anything-but": { "exists": false } }] }, "s[0].anything-but.exists"]
    ]));
}

#[test]
fn rejects_bad_cidr() {
    rejects(json!([
        // content_ip_address_EXC, _bad_ip_EXC, _bad_mask_EXC, _type_EXC, _v6_bad_ip_EXC
        [{ "ip": [{ "cidr": "bad-filter" }] }, "ip[0].cidr"],
        [{ "ip": [{ "cidr": "xx.11.xx/8" }] }, "ip[0].cidr"],
        [{ "ip": [{ "cidr": "bad-/64filter" }] }, "ip[0].cidr"],
        [{ "ip": [{ "cidr": ["bad-type"] }] }, "ip[0].cidr"],
        [{ "ip": [{ "cidr": "xxxx:db8:1234:1a00::/64" }] }, "ip[0].cidr"],
        [{ "ip": [{ "cidr": "10.0.0.0/33" }] }, "ip[0].cidr"],
        [{ "ip": [{ "cidr": "::/129" }] }, "ip[0].cidr"],
        [{ "ip": [{ "cidr": "10.0.0.0/-1" }] }, "ip[0].cidr"],
        [{ "ip": [{ "cidr": "10.0.0.0/8/8" }] }, "ip[0].cidr"],
        [{ "ip": [{ "cidr": "10.0.0.0" }] }, "ip[0].cidr"]
    ]));
}

#[test]
fn rejects_bad_or() {
    rejects(json!([
        [{ "$or": { "a": ["x"] } }, "$or"],
        [{ "$or": [] }, "$or"],
        [{ "$or": [{ "a": ["x"] }] }, "$or"],
        [{ "$or": [{ "a": ["x"] }, ["b"]] }, "$or[1]"],
        [{ "detail": { "$or": [{ "a": ["x"] }, "b"] } }, "detail.$or[1]"],
        [{ "$or": [{ "a": ["x"] }, {}] }, "$or[1]"],
        [{ "$or": [{ "a": ["x"] }, { "b": [] }] }, "$or[1].b"],
        [{ "$or": [{ "a": ["x"] }, { "b": [{ "prefix": 1 }] }] }, "$or[1].b[0].prefix"],
        // event-ruler refuses operator names as fields inside `$or`, at any depth.
        [{ "$or": [{ "numeric": [123] }, { "prefix": ["abc"] }] }, "$or[0].numeric"],
        [{ "$or": [{ "a": ["x"] }, { "b": { "prefix": ["y"] } }] }, "$or[1].b.prefix"],
        [{ "$or": [{ "a": ["x"] }, { "$or": [{ "b": ["y"] }, { "exists": [true] }] }] }, "$or[1].$or[1].exists"]
    ]));
}
