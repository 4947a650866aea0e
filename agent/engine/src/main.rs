//! loadfleet-engine: speaks the stdio protocol of proto/loadfleet/v1/engine.proto.
//! Started by loadfleet-agent, one per core; not meant to be run by hand.

use std::process::ExitCode;

use loadfleet_engine::load::Load;
use loadfleet_engine::reactor::Reactor;
use loadfleet_engine::run::{Run, Steering};
use loadfleet_engine::scenarios::{self, Scenarios};
use loadfleet_engine::wire::{emit, pb, read_frame};
use pb::engine_command::Command;
use pb::engine_event::Event;
use tokio::sync::mpsc;

fn main() -> ExitCode {
    if std::env::args().len() > 1 {
        eprintln!(
            "loadfleet-engine {}: takes no arguments; it is driven by loadfleet-agent over stdin/stdout",
            env!("CARGO_PKG_VERSION")
        );
        return ExitCode::from(2);
    }
    raise_open_files_limit();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let code = tokio::task::LocalSet::new().block_on(&runtime, engine());
    // The stdin reader sits in a blocking read that would hold up an orderly shutdown.
    runtime.shutdown_background();
    code
}

/// Every connection is a file descriptor; the usual soft limit of 1024 would cap a closed
/// model at about 1000 clients, so take what the hard limit allows.
fn raise_open_files_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

async fn engine() -> ExitCode {
    emit(Event::Ready(pb::EngineReady { version: env!("CARGO_PKG_VERSION").into() }));
    let (sender, mut commands) = mpsc::unbounded_channel();
    tokio::task::spawn_local(read_commands(sender));

    let Some(spec) = first_job(&mut commands).await else {
        return ExitCode::SUCCESS;
    };
    let prepared = match prepare(&spec) {
        Ok(prepared) => prepared,
        Err(message) => {
            emit(Event::Failed(pb::EngineFailed { message }));
            return ExitCode::from(1);
        }
    };
    steer(prepared, &mut commands).await;
    emit(Event::Finished(pb::EngineFinished {}));
    ExitCode::SUCCESS
}

/// The job of the first start command; None when the agent stops the engine before (finished
/// is sent) or is gone.
async fn first_job(commands: &mut mpsc::UnboundedReceiver<Command>) -> Option<pb::JobSpec> {
    loop {
        match commands.recv().await {
            Some(Command::Start(spec)) => return Some(spec),
            Some(Command::Stop(_)) => {
                emit(Event::Finished(pb::EngineFinished {}));
                return None;
            }
            Some(Command::Adjust(_)) => eprintln!("loadfleet-engine: adjust before start ignored"),
            Some(Command::Budget(_)) => eprintln!("loadfleet-engine: budget before start ignored"),
            Some(Command::ScenarioAdjust(_)) => eprintln!("loadfleet-engine: scenario adjust before start ignored"),
            Some(Command::FeedAppend(_)) => eprintln!("loadfleet-engine: feed rows before start ignored"),
            None => return None,
        }
    }
}

/// A job as it runs: a plain job's one run, or the runs of its scenarios on one reactor.
enum Prepared {
    Plain(Run),
    Scenarios(Scenarios),
}

/// The run of the job, or why it cannot run (the spec's problems, or the reactor's failure).
fn prepare(spec: &pb::JobSpec) -> Result<Prepared, String> {
    let mut jobs = scenarios::jobs_of(spec).inspect_err(|message| {
        eprintln!("loadfleet-engine: cannot run job {}: {message}", spec.job_id);
    })?;
    let reactor = Reactor::new().map_err(|e| {
        let message = format!("cannot start the engine's reactor: {e}");
        eprintln!("loadfleet-engine: {message}");
        message
    })?;
    Ok(if spec.scenarios.is_empty() {
        Prepared::Plain(Run::with_reactor(jobs.pop().expect("a plain spec is one job"), reactor))
    } else {
        Prepared::Scenarios(Scenarios::new(jobs, spec.start_at_ms, &reactor))
    })
}

/// Runs the job to its end, following the agent's commands meanwhile.
async fn steer(prepared: Prepared, commands: &mut mpsc::UnboundedReceiver<Command>) {
    let report = |report| emit(Event::Interval(report));
    let (steerings, mut running) = match prepared {
        Prepared::Plain(run) => (vec![run.steering()], tokio::task::spawn_local(run.execute(report))),
        Prepared::Scenarios(scenarios) => (scenarios.steerings(), tokio::task::spawn_local(scenarios.execute(report))),
    };
    loop {
        tokio::select! {
            _ = &mut running => break,
            Some(command) = commands.recv() => follow(command, &steerings),
        }
    }
}

/// One command of the agent for a running job: adjust, budget and feed_append act on the first
/// (a plain job's only) scenario, scenario_adjust on the scenario it names, stop on all.
fn follow(command: Command, steerings: &[Steering]) {
    match command {
        Command::Adjust(share) => match Load::from_proto(&share) {
            Ok(load) => steerings[0].adjust(load),
            Err(e) => eprintln!("loadfleet-engine: adjust ignored: {e}"),
        },
        Command::Stop(_) => steerings.iter().for_each(Steering::stop),
        Command::Budget(budget) => steerings[0].raise_budget(budget.max_requests),
        Command::ScenarioAdjust(adjust) => {
            let Some(steering) = steerings.get(adjust.scenario as usize) else {
                let count = steerings.len();
                eprintln!("loadfleet-engine: adjust of scenario {} ignored: {count} scenario(s)", adjust.scenario);
                return;
            };
            match adjust.load.as_ref().map(Load::from_proto) {
                Some(Ok(load)) => steering.adjust(load),
                Some(Err(e)) => eprintln!("loadfleet-engine: adjust of scenario {} ignored: {e}", adjust.scenario),
                None => {}
            }
            steering.raise_budget(adjust.max_requests);
        }
        Command::FeedAppend(append) => {
            if let Err(e) = steerings[0].append_rows(&append.blocks) {
                eprintln!("loadfleet-engine: feed rows ignored: {e}");
            }
        }
        Command::Start(_) => eprintln!("loadfleet-engine: a job is already running; start ignored"),
    }
}

/// Forwards commands; the end of stdin means the agent is gone, and the engine exits at once.
async fn read_commands(sender: mpsc::UnboundedSender<Command>) {
    let mut stdin = tokio::io::stdin();
    loop {
        match read_frame::<pb::EngineCommand, _>(&mut stdin).await {
            Ok(Some(pb::EngineCommand { command: Some(command) })) => {
                let _ = sender.send(command);
            }
            Ok(Some(_)) => eprintln!("loadfleet-engine: empty command ignored"),
            Ok(None) => {
                eprintln!("loadfleet-engine: stdin closed (agent gone); exiting");
                std::process::exit(0);
            }
            Err(e) => {
                eprintln!("loadfleet-engine: {e}; exiting");
                std::process::exit(2);
            }
        }
    }
}
