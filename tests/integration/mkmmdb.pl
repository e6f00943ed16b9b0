#!/usr/bin/perl
# mkmmdb.pl: write a small MaxMind DB for the tests.
#
#   mkmmdb.pl [-4] OUT.mmdb NET=[CC][:ASN] ...
#
# Each NET (CIDR, IPv4 or IPv6) gets country.iso_code CC and, when given,
# autonomous_system_number ASN; "@CC" sets registered_country.iso_code
# only (readers fall back to it). The tree is IPv6 with IPv4 aliased into
# ::ffff:0:0/96 like MaxMind's own files, or IPv4 only with -4. Reserved
# ranges (loopback) are allowed: the tests run on 127.0.0.0/8.
use strict;
use warnings;

use MaxMind::DB::Writer::Tree;

my $ipv = 6;
if (@ARGV && $ARGV[0] eq '-4') {
	$ipv = 4;
	shift @ARGV;
}
die "usage: mkmmdb.pl [-4] OUT.mmdb NET=[CC][:ASN] ...\n" if @ARGV < 1;
my $out = shift @ARGV;

my %types = (
	country                  => 'map',
	registered_country       => 'map',
	iso_code                 => 'utf8_string',
	autonomous_system_number => 'uint32',
);

my $tree = MaxMind::DB::Writer::Tree->new(
	ip_version               => $ipv,
	record_size              => 24,
	database_type            => 'Airlock-Test-Country-ASN',
	languages                => ['en'],
	description              => { en => 'airlock test database' },
	map_key_type_callback    => sub { $types{ $_[0] } },
	alias_ipv6_to_ipv4       => $ipv == 6 ? 1 : 0,
	remove_reserved_networks => 0,
);

for my $arg (@ARGV) {
	my ($net, $cc, $asn) = $arg =~ m{^([0-9A-Fa-f.:]+/\d+)=(\@?[A-Za-z]*)(?::(\d+))?$}
	    or die "mkmmdb.pl: bad entry \"$arg\" (want NET=[CC][:ASN])\n";
	my %rec;
	if ($cc =~ s/^\@//) {
		$rec{registered_country} = { iso_code => $cc };
	} elsif ($cc ne '') {
		$rec{country} = { iso_code => $cc };
	}
	$rec{autonomous_system_number} = $asn + 0 if defined $asn;
	$tree->insert_network($net, \%rec);
}

open(my $fh, '>:raw', $out) or die "mkmmdb.pl: $out: $!\n";
$tree->write_tree($fh);
close($fh) or die "mkmmdb.pl: $out: $!\n";
