double() { echo $(( 2 * $1 )); }
