// Written by stb-engine's plan examples test (STB_UPDATE_PLAN_EXAMPLES=1 rewrites it):
// each example project's plan as `stb plan --json` prints it. `npm run check` checks
// them against the UI's Plan type; the Rust test checks they are today's plans.
import type { Plan } from "./plan";

export const planExamples: Record<string, Plan> = {
  "adopted_customers": {
    "adapter": "clickhouse",
    "creation": [
      {
        "kind": "table",
        "relation": "tbl__latest_customers"
      },
      {
        "kind": "materialized_view",
        "relation": "mv__latest_customers"
      }
    ],
    "database": "shop",
    "entries": [
      {
        "is_replay_root": true,
        "model": "latest_customers",
        "reason": "all_models",
        "relation_names": [
          "tbl__latest_customers",
          "mv__latest_customers"
        ],
        "sql_change": {
          "current_hash": "55315370712d290e10fedfe4b85eb2341b4214f766114ccee120235a3434c152",
          "previous_hash": null,
          "status": "first_baseline",
          "unified_diff": ""
        }
      }
    ],
    "execution_scope": [
      "latest_customers"
    ],
    "landing_repairs": [],
    "mode": "direct",
    "plan_hash": "f5ff790ff1f0f638d40766cc541d2b2293df2b3202acc363c05862c74616d044",
    "prerequisite_scope": [
      {
        "framework_managed": false,
        "name": "customer_events",
        "present": true
      }
    ],
    "replay_cost": {
      "budget": {
        "max_bytes": null,
        "max_rows": null
      },
      "bytes": 0,
      "estimated_seconds": null,
      "over_budget": [],
      "roots_without_bytes": 0,
      "rows": 0,
      "throughput": null
    },
    "replay_costs": [],
    "replay_roots": [
      {
        "bounded": true,
        "driving_input": "customer_events",
        "driving_input_relation": "(SELECT *, event_partition AS _replay_partition, event_offset AS _replay_offset, event_time AS _replay_timestamp FROM shop.customer_events_existing)",
        "model": "latest_customers",
        "model_key": {
          "name": "latest_customers"
        },
        "propagated_models": [],
        "reason": "driving_input_not_rebuilt",
        "replay_boundary_mode": "offsets",
        "replay_window": null,
        "settings": [],
        "skips_keys_already_written": [
          "_replay_partition",
          "_replay_offset"
        ],
        "stage": 0,
        "start_time_column": null,
        "waits_for": []
      }
    ],
    "selection_mode": "all",
    "shrink": {
      "discarded_by_start_time": 0,
      "lost_rows": 0,
      "models": [],
      "needs_allow_shrink": false
    },
    "source_recreations": [],
    "start_time": null,
    "teardown": [
      {
        "kind": "materialized_view",
        "relation": "mv__latest_customers"
      },
      {
        "kind": "table",
        "relation": "tbl__latest_customers"
      }
    ],
    "validation": null,
    "warnings": []
  },
  "deployments": {
    "adapter": "clickhouse",
    "database": "shop",
    "deployment_created_at": "2026-12-05 12:00:00.000",
    "deployment_id": "20261205T120000Z_abcdef",
    "mode": "virtual environments",
    "object_changes": [
      {
        "active_deployment_id": null,
        "change_type": "create",
        "force_full_refresh": false,
        "forced_start_time": null,
        "key": {
          "database": "shop",
          "name": "tbl__order_events",
          "object_type": "table"
        },
        "model": "order_events",
        "root_state": "greenfield",
        "schema_change_kind": null,
        "seed_compatibility": null
      },
      {
        "active_deployment_id": null,
        "change_type": "create",
        "force_full_refresh": false,
        "forced_start_time": null,
        "key": {
          "database": "shop",
          "name": "mv__order_events",
          "object_type": "materialized_view"
        },
        "model": "order_events",
        "root_state": "greenfield",
        "schema_change_kind": null,
        "seed_compatibility": null
      },
      {
        "active_deployment_id": null,
        "change_type": "create",
        "force_full_refresh": false,
        "forced_start_time": null,
        "key": {
          "database": "shop",
          "name": "tbl__large_events",
          "object_type": "table"
        },
        "model": "large_events",
        "root_state": "greenfield",
        "schema_change_kind": null,
        "seed_compatibility": null
      },
      {
        "active_deployment_id": null,
        "change_type": "create",
        "force_full_refresh": false,
        "forced_start_time": null,
        "key": {
          "database": "shop",
          "name": "mv__large_events",
          "object_type": "materialized_view"
        },
        "model": "large_events",
        "root_state": "greenfield",
        "schema_change_kind": null,
        "seed_compatibility": null
      },
      {
        "active_deployment_id": null,
        "change_type": "create",
        "force_full_refresh": false,
        "forced_start_time": null,
        "key": {
          "database": "shop",
          "name": "view__large_event_count",
          "object_type": "view"
        },
        "model": "large_event_count",
        "root_state": "greenfield",
        "schema_change_kind": null,
        "seed_compatibility": null
      }
    ],
    "plan_hash": "14fa7dd1b77ba7b6e896620bd5b02ab435b66bb7128fce4686748d1ab81028a5",
    "prepared_shadow_objects": [
      {
        "logical_key": "tbl__order_events",
        "logical_model_name": "order_events",
        "object_type": "table",
        "physical_name": "tbl__order_events__20261205T120000Z_abcdef"
      },
      {
        "logical_key": "mv__order_events",
        "logical_model_name": "order_events",
        "object_type": "materialized_view",
        "physical_name": "mv__order_events__20261205T120000Z_abcdef"
      },
      {
        "logical_key": "tbl__large_events",
        "logical_model_name": "large_events",
        "object_type": "table",
        "physical_name": "tbl__large_events__20261205T120000Z_abcdef"
      },
      {
        "logical_key": "mv__large_events",
        "logical_model_name": "large_events",
        "object_type": "materialized_view",
        "physical_name": "mv__large_events__20261205T120000Z_abcdef"
      },
      {
        "logical_key": "view__large_event_count",
        "logical_model_name": "large_event_count",
        "object_type": "view",
        "physical_name": "view__large_event_count__20261205T120000Z_abcdef"
      }
    ],
    "rebuild_subtrees": [
      {
        "affected_keys": [
          "order_events",
          "large_events",
          "large_event_count"
        ],
        "configured_backfill_mode": null,
        "execution_lookback_seconds": null,
        "execution_mode": "full_rebuild",
        "execution_start_time": null,
        "forced_full_refresh": false,
        "forced_start_time": null,
        "history_preserving_bounded_supported": false,
        "replay_required": true,
        "resolved_bounded_replay_fallback": null,
        "root_key": "order_events",
        "strategy": "shadow_rebuild",
        "upstream_boundary_key": "orders"
      }
    ],
    "replay_cost": {
      "budget": {
        "max_bytes": null,
        "max_rows": null
      },
      "bytes": 0,
      "estimated_seconds": null,
      "over_budget": [],
      "roots_without_bytes": 0,
      "rows": 0,
      "throughput": null
    },
    "replay_costs": [],
    "sql_diffs": [],
    "steps": [
      "plan-1-table-tbl__order_events",
      "plan-1-materialized_view-mv__order_events",
      "plan-1-table-tbl__large_events",
      "plan-1-materialized_view-mv__large_events",
      "plan-1-view-view__large_event_count",
      "backfill-1-order_events",
      "audit-1-order_events",
      "publish-1-order_events"
    ],
    "warnings": []
  },
  "kafka_orders": {
    "adapter": "clickhouse",
    "creation": [
      {
        "kind": "table",
        "relation": "tbl__orders_clean"
      },
      {
        "kind": "table",
        "relation": "tbl__order_totals"
      },
      {
        "kind": "materialized_view",
        "relation": "mv__order_totals"
      },
      {
        "kind": "materialized_view",
        "relation": "mv__orders_clean"
      },
      {
        "kind": "view",
        "relation": "view__status_summary"
      }
    ],
    "database": "shop",
    "entries": [
      {
        "is_replay_root": true,
        "model": "orders_clean",
        "reason": "all_models",
        "relation_names": [
          "tbl__orders_clean",
          "mv__orders_clean"
        ],
        "sql_change": {
          "current_hash": "f40728f58916086be64c8629edd9f7f9e8732c149214a8ebc15538ff9380f4ea",
          "previous_hash": null,
          "status": "first_baseline",
          "unified_diff": ""
        }
      },
      {
        "is_replay_root": false,
        "model": "order_totals",
        "reason": "all_models",
        "relation_names": [
          "tbl__order_totals",
          "mv__order_totals"
        ],
        "sql_change": {
          "current_hash": "fe50d877be5f4e989b87885b24bd637955c931e3f8f6a2130ea5906894d00013",
          "previous_hash": null,
          "status": "first_baseline",
          "unified_diff": ""
        }
      },
      {
        "is_replay_root": false,
        "model": "status_summary",
        "reason": "all_models",
        "relation_names": [
          "view__status_summary"
        ],
        "sql_change": {
          "current_hash": "10f947feb9a573115bfcf6c1a0de25e2aea855cf4800831381e22492b94ba3bc",
          "previous_hash": null,
          "status": "first_baseline",
          "unified_diff": ""
        }
      }
    ],
    "execution_scope": [
      "orders_clean",
      "order_totals",
      "status_summary"
    ],
    "landing_repairs": [],
    "mode": "direct",
    "plan_hash": "60c997a60b21b41986134eb7d44aa29b39379186a0718652c43653b069dbd5f0",
    "prerequisite_scope": [
      {
        "framework_managed": true,
        "name": "orders",
        "present": false
      }
    ],
    "replay_cost": {
      "budget": {
        "max_bytes": null,
        "max_rows": null
      },
      "bytes": 0,
      "estimated_seconds": null,
      "over_budget": [],
      "roots_without_bytes": 0,
      "rows": 0,
      "throughput": null
    },
    "replay_costs": [],
    "replay_roots": [
      {
        "bounded": true,
        "driving_input": "orders",
        "driving_input_relation": "shop.raw__orders",
        "model": "orders_clean",
        "model_key": {
          "name": "orders_clean"
        },
        "propagated_models": [
          "order_totals"
        ],
        "reason": "driving_input_not_rebuilt",
        "replay_boundary_mode": "offsets",
        "replay_window": null,
        "settings": [],
        "skips_keys_already_written": [
          "_replay_partition",
          "_replay_offset"
        ],
        "stage": 0,
        "start_time_column": null,
        "waits_for": []
      }
    ],
    "selection_mode": "all",
    "shrink": {
      "discarded_by_start_time": 0,
      "lost_rows": 0,
      "models": [],
      "needs_allow_shrink": false
    },
    "source_recreations": [],
    "start_time": null,
    "teardown": [
      {
        "kind": "view",
        "relation": "view__status_summary"
      },
      {
        "kind": "materialized_view",
        "relation": "mv__order_totals"
      },
      {
        "kind": "materialized_view",
        "relation": "mv__orders_clean"
      },
      {
        "kind": "table",
        "relation": "tbl__order_totals"
      },
      {
        "kind": "table",
        "relation": "tbl__orders_clean"
      }
    ],
    "validation": null,
    "warnings": []
  },
  "macros_quality": {
    "adapter": "clickhouse",
    "creation": [
      {
        "kind": "table",
        "relation": "tbl__payments_clean"
      },
      {
        "kind": "materialized_view",
        "relation": "mv__payments_clean"
      }
    ],
    "database": "shop",
    "entries": [
      {
        "is_replay_root": true,
        "model": "payments_clean",
        "reason": "all_models",
        "relation_names": [
          "tbl__payments_clean",
          "mv__payments_clean"
        ],
        "sql_change": {
          "current_hash": "ecdc47029c918475c30adc662eebda15ec3683cfedf6cdd3bb49cbbdb4efb268",
          "previous_hash": null,
          "status": "first_baseline",
          "unified_diff": ""
        }
      }
    ],
    "execution_scope": [
      "payments_clean"
    ],
    "landing_repairs": [],
    "mode": "direct",
    "plan_hash": "fc92a4442f2133e054caca4f72dbb1f78d4c170e82240481380e5f469dec7faa",
    "prerequisite_scope": [
      {
        "framework_managed": true,
        "name": "payments",
        "present": false
      }
    ],
    "replay_cost": {
      "budget": {
        "max_bytes": null,
        "max_rows": null
      },
      "bytes": 0,
      "estimated_seconds": null,
      "over_budget": [],
      "roots_without_bytes": 0,
      "rows": 0,
      "throughput": null
    },
    "replay_costs": [],
    "replay_roots": [
      {
        "bounded": true,
        "driving_input": "payments",
        "driving_input_relation": "shop.raw__payments",
        "model": "payments_clean",
        "model_key": {
          "name": "payments_clean"
        },
        "propagated_models": [],
        "reason": "driving_input_not_rebuilt",
        "replay_boundary_mode": "offsets",
        "replay_window": null,
        "settings": [],
        "skips_keys_already_written": [
          "_replay_partition",
          "_replay_offset"
        ],
        "stage": 0,
        "start_time_column": null,
        "waits_for": []
      }
    ],
    "selection_mode": "all",
    "shrink": {
      "discarded_by_start_time": 0,
      "lost_rows": 0,
      "models": [],
      "needs_allow_shrink": false
    },
    "source_recreations": [],
    "start_time": null,
    "teardown": [
      {
        "kind": "materialized_view",
        "relation": "mv__payments_clean"
      },
      {
        "kind": "table",
        "relation": "tbl__payments_clean"
      }
    ],
    "validation": null,
    "warnings": []
  },
  "orders": {
    "adapter": "clickhouse",
    "creation": [
      {
        "kind": "table",
        "relation": "tbl__order_events"
      },
      {
        "kind": "table",
        "relation": "tbl__paid_orders"
      },
      {
        "kind": "table",
        "relation": "tbl__customer_revenue"
      },
      {
        "kind": "materialized_view",
        "relation": "mv__customer_revenue"
      },
      {
        "kind": "materialized_view",
        "relation": "mv__paid_orders"
      },
      {
        "kind": "materialized_view",
        "relation": "mv__order_events"
      },
      {
        "kind": "view",
        "relation": "view__order_status"
      },
      {
        "kind": "view",
        "relation": "view__top_customers"
      }
    ],
    "database": "shop",
    "entries": [
      {
        "is_replay_root": true,
        "model": "order_events",
        "reason": "all_models",
        "relation_names": [
          "tbl__order_events",
          "mv__order_events"
        ],
        "sql_change": {
          "current_hash": "f35ab8dd682f3cd4f9f879cc61bd31877f82ec18cbc25df58141520fe706cf7e",
          "previous_hash": null,
          "status": "first_baseline",
          "unified_diff": ""
        }
      },
      {
        "is_replay_root": false,
        "model": "paid_orders",
        "reason": "all_models",
        "relation_names": [
          "tbl__paid_orders",
          "mv__paid_orders"
        ],
        "sql_change": {
          "current_hash": "ca87e8156c2ec0db8f1f52c2b79352b3278344fffa7d2762d56fe90105c45e6a",
          "previous_hash": null,
          "status": "first_baseline",
          "unified_diff": ""
        }
      },
      {
        "is_replay_root": false,
        "model": "customer_revenue",
        "reason": "all_models",
        "relation_names": [
          "tbl__customer_revenue",
          "mv__customer_revenue"
        ],
        "sql_change": {
          "current_hash": "a03358e780314f338c13588ca29a1fd17ca41412e87e365cdf039a27bef03203",
          "previous_hash": null,
          "status": "first_baseline",
          "unified_diff": ""
        }
      },
      {
        "is_replay_root": false,
        "model": "order_status",
        "reason": "all_models",
        "relation_names": [
          "view__order_status"
        ],
        "sql_change": {
          "current_hash": "120c64feea87acad909e7666413843d21e59ca74dc1cf0268281723507023653",
          "previous_hash": null,
          "status": "first_baseline",
          "unified_diff": ""
        }
      },
      {
        "is_replay_root": false,
        "model": "top_customers",
        "reason": "all_models",
        "relation_names": [
          "view__top_customers"
        ],
        "sql_change": {
          "current_hash": "866ef3fb680b7b5d4f99344bdc408ec1c8a63e34d16cae2a8fac347c112b6a87",
          "previous_hash": null,
          "status": "first_baseline",
          "unified_diff": ""
        }
      }
    ],
    "execution_scope": [
      "order_events",
      "paid_orders",
      "customer_revenue",
      "order_status",
      "top_customers"
    ],
    "landing_repairs": [],
    "mode": "direct",
    "plan_hash": "551ca6ce59853308dc009a3f1c5209c5cac673d12ed1e41026cd1b9fb340ed73",
    "prerequisite_scope": [
      {
        "framework_managed": true,
        "name": "orders",
        "present": false
      }
    ],
    "replay_cost": {
      "budget": {
        "max_bytes": null,
        "max_rows": null
      },
      "bytes": 0,
      "estimated_seconds": null,
      "over_budget": [],
      "roots_without_bytes": 0,
      "rows": 0,
      "throughput": null
    },
    "replay_costs": [],
    "replay_roots": [
      {
        "bounded": true,
        "driving_input": "orders",
        "driving_input_relation": "shop.raw__orders",
        "model": "order_events",
        "model_key": {
          "name": "order_events"
        },
        "propagated_models": [
          "paid_orders",
          "customer_revenue"
        ],
        "reason": "driving_input_not_rebuilt",
        "replay_boundary_mode": "offsets",
        "replay_window": null,
        "settings": [],
        "skips_keys_already_written": [
          "_replay_partition",
          "_replay_offset"
        ],
        "stage": 0,
        "start_time_column": null,
        "waits_for": []
      }
    ],
    "selection_mode": "all",
    "shrink": {
      "discarded_by_start_time": 0,
      "lost_rows": 0,
      "models": [],
      "needs_allow_shrink": false
    },
    "source_recreations": [],
    "start_time": null,
    "teardown": [
      {
        "kind": "view",
        "relation": "view__top_customers"
      },
      {
        "kind": "view",
        "relation": "view__order_status"
      },
      {
        "kind": "materialized_view",
        "relation": "mv__customer_revenue"
      },
      {
        "kind": "materialized_view",
        "relation": "mv__paid_orders"
      },
      {
        "kind": "materialized_view",
        "relation": "mv__order_events"
      },
      {
        "kind": "table",
        "relation": "tbl__customer_revenue"
      },
      {
        "kind": "table",
        "relation": "tbl__paid_orders"
      },
      {
        "kind": "table",
        "relation": "tbl__order_events"
      }
    ],
    "validation": null,
    "warnings": []
  },
  "mixed": {
    "direct": {
      "adapter": "clickhouse",
      "creation": [
        {
          "kind": "table",
          "relation": "tbl__direct_order_events"
        },
        {
          "kind": "materialized_view",
          "relation": "mv__direct_order_events"
        }
      ],
      "database": "shop",
      "entries": [
        {
          "is_replay_root": true,
          "model": "direct_order_events",
          "reason": "selected",
          "relation_names": [
            "tbl__direct_order_events",
            "mv__direct_order_events"
          ],
          "sql_change": {
            "current_hash": "3e17e62023eebf7ff49422b4e75d65638260a33abc62ed8e3c4581176ffeaf83",
            "previous_hash": null,
            "status": "first_baseline",
            "unified_diff": ""
          }
        }
      ],
      "execution_scope": [
        "direct_order_events"
      ],
      "landing_repairs": [],
      "mode": "direct",
      "plan_hash": "7de7b562319a5de9684d180d1e86b7e68b80154fe9f7c174d6d84961373f609e",
      "prerequisite_scope": [
        {
          "framework_managed": true,
          "name": "orders",
          "present": false
        }
      ],
      "replay_cost": {
        "budget": {
          "max_bytes": null,
          "max_rows": null
        },
        "bytes": 0,
        "estimated_seconds": null,
        "over_budget": [],
        "roots_without_bytes": 0,
        "rows": 0,
        "throughput": null
      },
      "replay_costs": [],
      "replay_roots": [
        {
          "bounded": true,
          "driving_input": "orders",
          "driving_input_relation": "shop.raw__orders",
          "model": "direct_order_events",
          "model_key": {
            "name": "direct_order_events"
          },
          "propagated_models": [],
          "reason": "driving_input_not_rebuilt",
          "replay_boundary_mode": "offsets",
          "replay_window": null,
          "settings": [],
          "skips_keys_already_written": [
            "_replay_partition",
            "_replay_offset"
          ],
          "stage": 0,
          "start_time_column": null,
          "waits_for": []
        }
      ],
      "selection_mode": "selected",
      "shrink": {
        "discarded_by_start_time": 0,
        "lost_rows": 0,
        "models": [],
        "needs_allow_shrink": false
      },
      "source_recreations": [],
      "start_time": null,
      "teardown": [
        {
          "kind": "materialized_view",
          "relation": "mv__direct_order_events"
        },
        {
          "kind": "table",
          "relation": "tbl__direct_order_events"
        }
      ],
      "validation": null,
      "warnings": []
    },
    "execution_order": [
      "virtual",
      "direct"
    ],
    "mode": "mixed",
    "plan_hash": "b175ca8d64be6f01bdfc73b4c64bda4122be84683d8d667662a38760b2d3dd52",
    "replay_cost": {
      "budget": {
        "max_bytes": null,
        "max_rows": null
      },
      "bytes": 0,
      "estimated_seconds": null,
      "over_budget": [],
      "roots_without_bytes": 0,
      "rows": 0,
      "throughput": null
    },
    "virtual": {
      "adapter": "clickhouse",
      "database": "shop",
      "deployment_created_at": "2026-12-05 12:00:00.000",
      "deployment_id": "20261205T120000Z_abcdef",
      "mode": "virtual environments",
      "object_changes": [
        {
          "active_deployment_id": null,
          "change_type": "create",
          "force_full_refresh": false,
          "forced_start_time": null,
          "key": {
            "database": "shop",
            "name": "tbl__order_events",
            "object_type": "table"
          },
          "model": "order_events",
          "root_state": "greenfield",
          "schema_change_kind": null,
          "seed_compatibility": null
        },
        {
          "active_deployment_id": null,
          "change_type": "create",
          "force_full_refresh": false,
          "forced_start_time": null,
          "key": {
            "database": "shop",
            "name": "mv__order_events",
            "object_type": "materialized_view"
          },
          "model": "order_events",
          "root_state": "greenfield",
          "schema_change_kind": null,
          "seed_compatibility": null
        },
        {
          "active_deployment_id": null,
          "change_type": "create",
          "force_full_refresh": false,
          "forced_start_time": null,
          "key": {
            "database": "shop",
            "name": "tbl__large_events",
            "object_type": "table"
          },
          "model": "large_events",
          "root_state": "greenfield",
          "schema_change_kind": null,
          "seed_compatibility": null
        },
        {
          "active_deployment_id": null,
          "change_type": "create",
          "force_full_refresh": false,
          "forced_start_time": null,
          "key": {
            "database": "shop",
            "name": "mv__large_events",
            "object_type": "materialized_view"
          },
          "model": "large_events",
          "root_state": "greenfield",
          "schema_change_kind": null,
          "seed_compatibility": null
        },
        {
          "active_deployment_id": null,
          "change_type": "create",
          "force_full_refresh": false,
          "forced_start_time": null,
          "key": {
            "database": "shop",
            "name": "view__large_event_count",
            "object_type": "view"
          },
          "model": "large_event_count",
          "root_state": "greenfield",
          "schema_change_kind": null,
          "seed_compatibility": null
        }
      ],
      "prepared_shadow_objects": [
        {
          "logical_key": "tbl__order_events",
          "logical_model_name": "order_events",
          "object_type": "table",
          "physical_name": "tbl__order_events__20261205T120000Z_abcdef"
        },
        {
          "logical_key": "mv__order_events",
          "logical_model_name": "order_events",
          "object_type": "materialized_view",
          "physical_name": "mv__order_events__20261205T120000Z_abcdef"
        },
        {
          "logical_key": "tbl__large_events",
          "logical_model_name": "large_events",
          "object_type": "table",
          "physical_name": "tbl__large_events__20261205T120000Z_abcdef"
        },
        {
          "logical_key": "mv__large_events",
          "logical_model_name": "large_events",
          "object_type": "materialized_view",
          "physical_name": "mv__large_events__20261205T120000Z_abcdef"
        },
        {
          "logical_key": "view__large_event_count",
          "logical_model_name": "large_event_count",
          "object_type": "view",
          "physical_name": "view__large_event_count__20261205T120000Z_abcdef"
        }
      ],
      "rebuild_subtrees": [
        {
          "affected_keys": [
            "order_events",
            "large_events",
            "large_event_count"
          ],
          "configured_backfill_mode": null,
          "execution_lookback_seconds": null,
          "execution_mode": "full_rebuild",
          "execution_start_time": null,
          "forced_full_refresh": false,
          "forced_start_time": null,
          "history_preserving_bounded_supported": false,
          "replay_required": true,
          "resolved_bounded_replay_fallback": null,
          "root_key": "order_events",
          "strategy": "shadow_rebuild",
          "upstream_boundary_key": "orders"
        }
      ],
      "replay_cost": {
        "budget": {
          "max_bytes": null,
          "max_rows": null
        },
        "bytes": 0,
        "estimated_seconds": null,
        "over_budget": [],
        "roots_without_bytes": 0,
        "rows": 0,
        "throughput": null
      },
      "replay_costs": [],
      "sql_diffs": [],
      "steps": [
        "plan-1-table-tbl__order_events",
        "plan-1-materialized_view-mv__order_events",
        "plan-1-table-tbl__large_events",
        "plan-1-materialized_view-mv__large_events",
        "plan-1-view-view__large_event_count",
        "backfill-1-order_events",
        "audit-1-order_events",
        "publish-1-order_events"
      ],
      "warnings": []
    }
  },
};
