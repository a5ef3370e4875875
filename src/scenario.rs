//! Declarative transfer scenarios (`fixtures/scenarios/*.scn`) and their runner.
