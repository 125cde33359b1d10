//! Prints the JSON Schema of `tt-model.yaml` (the library half of `tt-model schema`):
//! `cargo run -p tt-model-manifest --example schema > schemas/tt-model-5.1.schema.json`.

// The schema on stdout is this example's whole output.
#[allow(clippy::print_stdout)]
fn main() {
    print!("{}", tt_model_manifest::schema::json_schema_string());
}
