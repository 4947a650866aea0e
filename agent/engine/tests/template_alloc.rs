//! A rendering allocates nothing but the buffer's own growth: with room in the buffer, it
//! allocates nothing at all. Counted by tests/counting_alloc's global allocator (this thread's calls).

mod counting_alloc;

use counting_alloc::allocations;
use loadfleet_engine::rng::Rng;
use loadfleet_engine::row::Row;
use loadfleet_engine::template::{Context, DataColumns, Names, Place, Template};
use loadfleet_engine::vars::Vars;

#[test]
fn rendering_into_a_buffer_with_room_allocates_nothing() {
    let variables = vec!["csrf".to_string(), "sid".to_string()];
    let columns = vec!["username".to_string()];
    let data = [DataColumns { name: "accounts", columns: &columns }];
    let names = Names { variables: &variables, data: &data };
    let text = "user=${accounts.username:url}&csrf=${csrf:url}&j=${sid:json}&id=${uuid}&r=${random(1,100)}\
                &u=${user}&t=${now_ms}&a=${agent}&i=${iteration}";
    let template = Template::parse(text.as_bytes(), &names, Place::Body).unwrap();
    let mut vars = Vars::new(2).unwrap();
    vars.set(0, b"tok en/+").unwrap();
    vars.set(1, b"\"quoted\"").unwrap();
    let mut rng = Rng::new(5);
    let mut out = Vec::with_capacity(4096);
    let ends = [9u32];
    let before = allocations();
    for _ in 0..100 {
        out.clear();
        let mut ctx = Context {
            vars: &vars,
            row: Some(Row::new(0, b"alice bob", &ends)),
            user: 7,
            agent: 1,
            iteration: 2,
            now_ms: 3,
            rng: &mut rng,
        };
        template.render_into(&mut out, &mut ctx).unwrap();
    }
    let made = allocations() - before;
    assert_eq!(made, 0, "allocations in 100 renderings");
    let mut small = Vec::with_capacity(4);
    let mut ctx = Context { vars: &vars, row: None, user: 7, agent: 1, iteration: 2, now_ms: 3, rng: &mut rng };
    Template::parse(b"${csrf}", &names, Place::Body).unwrap().render_into(&mut small, &mut ctx).unwrap();
    assert!(allocations() > before + made, "the counter sees the buffer grow");
    assert!(out.starts_with(b"user=alice%20bob&csrf=tok%20en%2F%2B&j=\\\"quoted\\\"&id="), "{out:?}");
}
