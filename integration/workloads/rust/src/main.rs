fn main() {
    println!("2 + 3 = {}", workload::add(2, 3));
}
