// Generates the Rust types of the wire contract from the same .proto files the Python
// side uses (proto/loadfleet/v1), so the engine and the agent cannot drift apart.
fn main() -> std::io::Result<()> {
    let root = "../../proto";
    let files = ["loadfleet/v1/engine.proto", "loadfleet/v1/job.proto", "loadfleet/v1/stats.proto"];
    for file in files {
        println!("cargo:rerun-if-changed={root}/{file}");
    }
    let paths: Vec<String> = files.iter().map(|f| format!("{root}/{f}")).collect();
    prost_build::compile_protos(&paths, &[root])
}
